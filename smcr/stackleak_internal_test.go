package smcr

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A closed stack leaves nothing behind in package-level state: the
// first-contact locks named by it went with it (they kept its device, CQs
// and links reachable, several MiB per device ever opened).
func TestClosedStackForgotten(t *testing.T) {
	srv, cli := netip.MustParseAddr("127.78.0.1"), netip.MustParseAddr("127.78.0.2")
	cfg := Config{Signalling: SignalConfigured, PeerSpeaksSMC: true, UEIDs: []string{"GOROCE-TEST-UEID"}, LinkGroupLinger: 10 * time.Millisecond}
	ln, err := Listen("tcp", netip.AddrPortFrom(srv, 0).String(), &cfg)
	require.NoError(t, err)
	acc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		acc <- err
	}()
	d := Dialer{Config: cfg, LocalAddr: cli}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	require.Equal(t, ModeSMCRv2, c.(*Conn).Info().Mode, "%+v", c.(*Conn).Info())
	require.NoError(t, <-acc)
	c.Close()
	ln.Close()
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for OpenStacks() > 0 {
		require.False(t, time.Now().After(deadline), "stacks still open")
		time.Sleep(5 * time.Millisecond)
	}
	stale := 0
	firstContactLocks.Range(func(k, _ any) bool {
		st := k.(fcKey).st
		st.mu.Lock()
		if st.closed {
			stale++
		}
		st.mu.Unlock()
		return true
	})
	require.Zero(t, stale, "first-contact locks of closed stacks")
}
