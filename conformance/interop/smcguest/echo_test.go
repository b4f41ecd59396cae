//go:build linux

package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// listenTCP listens on a free loopback port for the echo tests (the
// programs themselves run AF_SMC in the guest; the echo logic is the same
// over TCP).
func listenTCP(t *testing.T) (*sock, netip.AddrPort) {
	t.Helper()
	l, err := newSock(true)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	require.NoError(t, l.listen(netip.MustParseAddrPort("127.0.0.1:0"), 16))
	sa, err := unix.Getsockname(l.fd)
	require.NoError(t, err)
	return l, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*unix.SockaddrInet4).Port))
}

// serveN accepts n connections and serves each with serveConn; it returns
// the errors once all are done.
func serveN(t *testing.T, l *sock, out *lineWriter, n int, o serverOpts) func() []error {
	deadline := time.Now().Add(20 * time.Second)
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var conns sync.WaitGroup
		for i := range n {
			c, _, err := l.accept(deadline)
			if err != nil {
				errs[i] = err
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				errs[i] = serveConn(out, i, c, o, deadline)
			}()
		}
		conns.Wait()
	}()
	return func() []error { wg.Wait(); return errs }
}

func TestEchoEndModes(t *testing.T) {
	for _, end := range []endMode{endShut, endClose, endAbort} {
		t.Run(string(end), func(t *testing.T) {
			l, ap := listenTCP(t)
			var srvOut, cliOut strings.Builder
			so, co := &lineWriter{w: &srvOut}, &lineWriter{w: &cliOut}
			wait := serveN(t, l, so, 3, serverOpts{end: endShut, peerAbort: end == endAbort})
			err := runClient(co, clientOpts{addr: ap, conns: 3, parallel: true, sizes: []int{1, 1024, 1 << 20}, end: end, tcp: true, timeout: 20 * time.Second})
			require.NoError(t, err, cliOut.String())
			for _, e := range wait() {
				assert.NoError(t, e, srvOut.String())
			}
			c := cliOut.String()
			assert.Contains(t, c, "client: conn 2 message 1 (1024 bytes) echoed OK\n")
			assert.Contains(t, c, "client: conn 0 closed ("+string(end)+")\n")
			assert.Contains(t, c, "client: done conns=3 failed=0 ")
			if end == endAbort {
				assert.Contains(t, c, "message 2 (1048576 bytes) sent, echo of the last 32768 bytes left unread")
				assert.Contains(t, srvOut.String(), "peer aborted")
			} else {
				assert.Contains(t, srvOut.String(), ": echoed 1049601 bytes crc32=0x")
				assert.Contains(t, srvOut.String(), "peer EOF (read 0)")
			}
			if end == endShut {
				assert.Contains(t, c, "client: conn 1 shutdown(SHUT_WR), read -> 0 (server EOF)\n")
			}
		})
	}
}

func TestEchoServerAbort(t *testing.T) {
	l, ap := listenTCP(t)
	var srvOut, cliOut strings.Builder
	wait := serveN(t, l, &lineWriter{w: &srvOut}, 1, serverOpts{end: endAbort})
	err := runClient(&lineWriter{w: &cliOut}, clientOpts{addr: ap, conns: 1, sizes: []int{4096}, end: endShut, peerAbort: true, tcp: true, timeout: 20 * time.Second})
	require.NoError(t, err, cliOut.String())
	assert.NoError(t, wait()[0])
	assert.Contains(t, srvOut.String(), "server: conn 0: read 1 byte, closing with ")
	assert.Contains(t, cliOut.String(), "server aborted after 0 bytes echoed")

	// Without -peer-abort the same reset is a failure, named.
	l, ap = listenTCP(t)
	cliOut.Reset()
	wait = serveN(t, l, &lineWriter{w: &srvOut}, 1, serverOpts{end: endAbort})
	err = runClient(&lineWriter{w: &cliOut}, clientOpts{addr: ap, conns: 1, sizes: []int{4096}, end: endShut, tcp: true, timeout: 20 * time.Second})
	assert.Error(t, err)
	wait()
	assert.Contains(t, cliOut.String(), "ECONNRESET (connection reset by peer)")
}

func TestEchoDetectsCorruption(t *testing.T) {
	// A "server" that echoes with one byte flipped.
	l, ap := listenTCP(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, _, err := l.accept(time.Now().Add(10 * time.Second))
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 100)
		got := 0
		for got < 100 {
			n, err := c.read(buf[got:], time.Now().Add(10*time.Second))
			if err != nil || n == 0 {
				return
			}
			got += n
		}
		buf[42] ^= 0x80
		c.writeAll(buf, time.Now().Add(10*time.Second))
	}()
	var cliOut strings.Builder
	err := runClient(&lineWriter{w: &cliOut}, clientOpts{addr: ap, conns: 1, sizes: []int{100}, end: endClose, tcp: true, timeout: 10 * time.Second})
	<-done
	assert.Error(t, err)
	assert.Contains(t, cliOut.String(), "echo differs at byte 42 of the message (stream offset 42)")
}

func TestConnectRefused(t *testing.T) {
	l, ap := listenTCP(t)
	l.Close() // nothing listens there any more
	var cliOut strings.Builder
	err := runClient(&lineWriter{w: &cliOut}, clientOpts{addr: ap, conns: 1, sizes: []int{1}, end: endShut, tcp: true, timeout: 5 * time.Second})
	assert.Error(t, err)
	assert.Contains(t, cliOut.String(), "ECONNREFUSED (connection refused)")
}

func TestEchoHolds(t *testing.T) {
	l, ap := listenTCP(t)
	var srvOut, cliOut strings.Builder
	wait := serveN(t, l, &lineWriter{w: &srvOut}, 1, serverOpts{end: endShut})
	prefix := filepath.Join(t.TempDir(), "hold")
	// 3000 falls inside the second message, 5120 is the end of the stream:
	// the connection stays open until that hold is released.
	o, err := parseClient([]string{ap.String()[:strings.LastIndexByte(ap.String(), ':')], strconv.Itoa(int(ap.Port())),
		"-sizes", "1k,4k", "-hold-at", "3000,5k", "-hold", prefix, "-tcp", "-timeout", "20s"})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- runClient(&lineWriter{w: &cliOut}, o) }()
	for i, want := range []string{"3000\n", "5120\n"} {
		name := prefix + "." + strconv.Itoa(i)
		var got []byte
		require.Eventually(t, func() bool { got, err = os.ReadFile(name + ".reached"); return err == nil }, 10*time.Second, 10*time.Millisecond, "hold %d never reached", i)
		assert.Equal(t, want, string(got))
		select {
		case err := <-done:
			t.Fatalf("the client ended at hold %d: %v\n%s", i, err, cliOut.String())
		default:
		}
		require.NoError(t, os.WriteFile(name, nil, 0o644))
	}
	require.NoError(t, <-done, cliOut.String())
	assert.NoError(t, wait()[0])
	assert.Contains(t, cliOut.String(), "client: conn 0 message 1 (4096 bytes) echoed OK\n")
}
