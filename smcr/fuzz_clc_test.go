package smcr_test

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// FuzzCLCServer sends arbitrary bytes to an SMC-R listener's TCP
// connection, as the first thing a client says: whatever they are, the
// listener answers with CLC messages or nothing, closes or falls back,
// never panics, never hangs past its handshake timeout, and serves the
// next connection.
func FuzzCLCServer(f *testing.F) {
	srvAddr, cli := freshAddrs()
	f.Add(proposal(cli, "GOROCE-TEST-UEID"))
	f.Add(proposalV2Only(cli, "SOMEONE-ELSE"))
	f.Add(proposalV2Only(cli))
	f.Add(withLen(proposal(cli, "GOROCE-TEST-UEID"), 0xFFFF))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte{0xE2, 0xD4, 0xC3, 0xD9})
	f.Add(smcwire.AppendDecline(nil, &smcwire.DeclineFields{CLCHeader: smcwire.CLCHeader{Version: 2}, Diagnosis: smcwire.DiagNoSMCRDev}))
	var (
		once sync.Once
		ln   net.Listener
	)
	f.Cleanup(func() {
		if ln != nil {
			ln.Close()
		}
	})
	f.Fuzz(func(t *testing.T, in []byte) {
		once.Do(func() {
			cfg := testConfig()
			cfg.HandshakeTimeout = 200 * time.Millisecond
			var err error
			if ln, err = smcr.Listen("tcp", srvAddr.String()+":0", &cfg); err != nil {
				t.Fatal(err)
			}
			go func() { // fallback connections: read them out and close
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						c.SetDeadline(time.Now().Add(time.Second))
						io.Copy(io.Discard, c)
						c.Close()
					}()
				}
			}()
		})
		if len(in) > 4096 {
			return
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(in)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // hang guard
		reply, err := io.ReadAll(io.LimitReader(c, 64<<10))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the listener neither answered nor closed: %v", err)
		} // a reset is a close (the listener closed with the input unread)
		for len(reply) > 0 { // CLC messages only, then whatever fell back
			m, err := smcwire.ParseCLC(reply)
			if err != nil {
				break
			}
			reply = reply[len(m):]
		}
	})
}
