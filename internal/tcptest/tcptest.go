// Package tcptest gives tests a plain TCP peer: a server that is no SMC
// peer, for the SMC-R stack's tests and its programs'.
package tcptest

import (
	"net"
	"net/netip"
	"testing"
)

// Server listens on a TCP port of addr and serves the first connection it
// accepts with serve, then closes it; the listener closes when the test
// ends.
func Server(tb testing.TB, addr netip.Addr, serve func(net.Conn)) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		tb.Fatalf("tcptest: listen on %v: %v", addr, err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err == nil {
			serve(c)
			c.Close()
		}
	}()
	return ln
}
