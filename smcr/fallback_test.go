package smcr_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/tcptest"
	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// A peer that does not speak SMC gets plain TCP on the same connection,
// its bytes untouched: an smcr client against a net.Listen server, an
// smcr server against a net.Dial client (which may speak first, or wait
// for the server), and peers whose configurations do not say SMC.
func TestFallbackToPlainTCP(t *testing.T) {
	noLeaks(t)
	payload := bytes.Repeat([]byte{0xE2, 0xD4, 0xC3}, 1000) // almost an eyecatcher, then not
	tests := []struct {
		name     string
		smcSrv   bool // the server is smcr (else net.Listen)
		smcCli   bool // the client is smcr (else net.Dial)
		speaks   bool // PeerSpeaksSMC on the smcr side(s)
		srvFirst bool // the server speaks first
		wantDiag smcwire.DiagCode
	}{
		{"smcr client, TCP server, not configured", false, true, false, false, smcwire.DiagPeerNoSMC},
		{"TCP client, smcr server, not configured, client speaks first", true, false, false, false, smcwire.DiagPeerNoSMC},
		{"TCP client, smcr server, not configured", true, false, false, true, smcwire.DiagPeerNoSMC},
		{"both smcr, neither configured", true, true, false, false, smcwire.DiagPeerNoSMC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.PeerSpeaksSMC = tt.speaks
			cfg.HandshakeTimeout = time.Second
			srvAddr, cliAddr := freshAddrs()
			var ln net.Listener
			var err error
			if tt.smcSrv {
				ln, err = smcr.Listen("tcp", netip.AddrPortFrom(srvAddr, 0).String(), &cfg)
			} else {
				ln, err = net.Listen("tcp", netip.AddrPortFrom(srvAddr, 0).String())
			}
			require.NoError(t, err)
			defer ln.Close()
			type res struct {
				c   net.Conn
				err error
			}
			acc := make(chan res, 1)
			go func() {
				c, err := ln.Accept()
				acc <- res{c, err}
			}()
			var c net.Conn
			if tt.smcCli {
				d := smcr.Dialer{Config: cfg, LocalAddr: cliAddr}
				c, err = d.DialContext(context.Background(), "tcp", ln.Addr().String())
			} else {
				nd := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(cliAddr, 0))}
				c, err = nd.Dial("tcp", ln.Addr().String())
			}
			require.NoError(t, err)
			defer c.Close()
			if tt.smcCli {
				i := requireMode(t, c, smcr.ModeFallback)
				require.Equal(t, tt.wantDiag, i.Fallback)
			}
			writer, reader := c, net.Conn(nil)
			if tt.srvFirst {
				r := <-acc
				require.NoError(t, r.err)
				defer r.c.Close()
				writer, reader = r.c, c
			}
			go func() {
				writer.Write(payload)
				writer.(interface{ CloseWrite() error }).CloseWrite()
			}()
			if reader == nil {
				r := <-acc
				require.NoError(t, r.err)
				defer r.c.Close()
				reader = r.c
			}
			if tt.smcSrv {
				s := reader
				if tt.srvFirst {
					s = writer
				}
				i := requireMode(t, s, smcr.ModeFallback)
				require.Equal(t, tt.wantDiag, i.Fallback)
			}
			require.NoError(t, reader.SetReadDeadline(time.Now().Add(30*time.Second)))
			got, err := io.ReadAll(reader)
			require.NoError(t, err)
			require.Equal(t, payload, got, "bytes untouched")
		})
	}
}

// A client configured to believe its peer speaks SMC, against a server
// that does not: the Proposal goes unanswered, and Dial fails (as Linux's
// connect does) rather than fall back onto a stream the server has read a
// CLC message from.
func TestUnansweredProposalFailsTheDial(t *testing.T) {
	noLeaks(t)
	srvAddr, cliAddr := freshAddrs()
	ln := tcptest.Server(t, srvAddr, func(c net.Conn) { io.Copy(io.Discard, c) })
	cfg := testConfig()
	cfg.HandshakeTimeout = 50 * time.Millisecond
	d := smcr.Dialer{Config: cfg, LocalAddr: cliAddr}
	_, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	require.ErrorContains(t, err, "no CLC Accept within")
}

// A Decline from the peer makes both sides fall back on the same
// connection: here the server has no UEID in common with a v2-only client.
func TestFallbackOnDecline(t *testing.T) {
	noLeaks(t)
	p := newPair(t, func(c *smcr.Config) { c.UEIDs = []string{"SERVER-ONLY"} })
	p.d.Config.UEIDs = []string{"CLIENT-ONLY"}
	p.d.Config.NoV1 = true
	c, s := p.dial(t)
	ic := requireMode(t, c, smcr.ModeFallback)
	require.Equal(t, "peer", ic.FallbackBy)
	require.Equal(t, smcwire.DiagNoSMCDev, ic.PeerDiagnosis, "as Linux: no UEID in common, no v2 device")
	is := requireMode(t, s, smcr.ModeFallback)
	require.Equal(t, smcwire.DiagNoSMCDev, is.Fallback)
	require.Equal(t, "local", is.FallbackBy)
	exchange(t, c, s, 100000)
}

// A client configured to believe its peer speaks SMC, against a plain TCP
// server that answers the Proposal with its own protocol (an HTTP 400, or
// a few bytes and then silence): the dial ends at once, with an error
// that says the peer does not speak SMC and what to do, not at the CLC
// timeout (an hour here; the context is only a hang guard).
func TestNonCLCReplyEndsTheDialAtOnce(t *testing.T) {
	for _, answer := range []string{"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "400\r\n", "\xE2\xD4\xC3\x00"} {
		t.Run(fmt.Sprintf("%q", answer), func(t *testing.T) {
			noLeaks(t)
			srvAddr, cliAddr := freshAddrs()
			ln := tcptest.Server(t, srvAddr, func(c net.Conn) {
				c.Read(make([]byte, 64))
				c.Write([]byte(answer))
				io.Copy(io.Discard, c) // and wait for more, as a server of another protocol may
			})
			cfg := testConfig()
			cfg.HandshakeTimeout = time.Hour
			d := smcr.Dialer{Config: cfg, LocalAddr: cliAddr}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := d.DialContext(ctx, "tcp", ln.Addr().String())
			require.ErrorIs(t, err, smcr.ErrPeerNotSMC)
			require.NotErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorContains(t, err, "Config.PeerSpeaksSMC said it does: dial a plain TCP server without it")
		})
	}
}
