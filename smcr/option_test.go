package smcr_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
	"github.com/goroce/goroce/smcr/tcpopt"
)

// needOption skips a test when this process may not load the sock_ops
// program that puts the SMC TCP option into handshakes (not root, no
// cgroup v2).
func needOption(t *testing.T) {
	t.Helper()
	s, err := tcpopt.Open()
	if errors.Is(err, tcpopt.ErrNotPermitted) || errors.Is(err, tcpopt.ErrUnsupported) {
		t.Skipf("the SMC TCP option is not available here: %v", err)
	}
	require.NoError(t, err)
	s.Close()
}

// With the SMC TCP option, as Linux signals it: two goroce ends that both
// send it speak SMC-R; against a plain TCP end (no option in its SYN or
// SYN-ACK) each falls back without sending a single CLC byte, and the
// plain end sees only the application's bytes.
func TestSignallingWithTheTCPOption(t *testing.T) {
	needOption(t)
	noLeaks(t)
	optionCfg := func(c *smcr.Config) { c.Signalling, c.PeerSpeaksSMC = smcr.SignalOption, false }

	t.Run("both signal: SMC-R", func(t *testing.T) {
		p := newPair(t, optionCfg)
		c, s := p.dial(t)
		ic := requireMode(t, c, smcr.ModeSMCRv2)
		is := requireMode(t, s, smcr.ModeSMCRv2)
		require.Equal(t, smcr.SignalOption, ic.Signalling)
		require.Equal(t, smcr.SignalOption, is.Signalling)
		exchange(t, c, s, 100000)
	})
	t.Run("plain TCP server", func(t *testing.T) {
		srv, cli := freshAddrs()
		ln, err := net.Listen("tcp", netip.AddrPortFrom(srv, 0).String())
		require.NoError(t, err)
		defer ln.Close()
		cfg := testConfig()
		optionCfg(&cfg)
		d := smcr.Dialer{Config: cfg, LocalAddr: cli}
		got := make(chan []byte, 1)
		go func() {
			s, err := ln.Accept()
			if err != nil {
				got <- nil
				return
			}
			defer s.Close()
			s.SetReadDeadline(time.Now().Add(10 * time.Second)) // hang guard
			b, _ := io.ReadAll(s)
			got <- b
		}()
		c, err := d.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		i := requireMode(t, c, smcr.ModeFallback)
		require.Equal(t, smcwire.DiagPeerNoSMC, i.Fallback)
		_, err = c.Write([]byte("hello"))
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.Equal(t, "hello", string(<-got), "no CLC byte before the application's")
	})
	t.Run("plain TCP client", func(t *testing.T) {
		p := newPair(t, optionCfg)
		c, err := net.Dial("tcp", p.ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		require.NoError(t, err)
		s := acceptOne(t, p, c)
		defer s.Close()
		i := requireMode(t, s, smcr.ModeFallback)
		require.Equal(t, smcwire.DiagPeerNoSMC, i.Fallback)
		buf := make([]byte, 5)
		_, err = io.ReadFull(s, buf)
		require.NoError(t, err)
		require.Equal(t, "hello", string(buf))
		_, err = s.Write([]byte("world"))
		require.NoError(t, err)
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // hang guard
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		require.Equal(t, "world", string(buf), "no CLC byte before the application's")
	})
}
