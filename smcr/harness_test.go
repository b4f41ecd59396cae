package smcr_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/smcr"
)

// Every test gets two loopback addresses of its own (127.77.N.1 for the
// server's device, .2 for the client's), so its link groups are its own and
// no test reuses another's.
var nextNet atomic.Uint32

// pair is a listener and a dialer on fresh devices.
type pair struct {
	ln  net.Listener
	d   smcr.Dialer
	cfg smcr.Config
}

// testConfig is SMC-R without the TCP option (tests run unprivileged too),
// a UEID for v2, and a short linger so that link groups end with the test.
func testConfig() smcr.Config {
	return smcr.Config{
		Signalling: smcr.SignalConfigured, PeerSpeaksSMC: true, UEIDs: []string{"GOROCE-TEST-UEID"},
		LinkGroupLinger: 20 * time.Millisecond, HandshakeTimeout: 10 * time.Second,
	}
}

func newPair(t testing.TB, mod func(*smcr.Config)) *pair {
	t.Helper()
	n := nextNet.Add(1)
	srv := netip.AddrFrom4([4]byte{127, 77, byte(n), 1})
	cli := netip.AddrFrom4([4]byte{127, 77, byte(n), 2})
	cfg := testConfig()
	if mod != nil {
		mod(&cfg)
	}
	ln, err := smcr.Listen("tcp", netip.AddrPortFrom(srv, 0).String(), &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return &pair{ln: ln, d: smcr.Dialer{Config: cfg, LocalAddr: cli}, cfg: cfg}
}

// dial returns a connected client and server.
func (p *pair) dial(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type res struct {
		c   net.Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := p.ln.Accept()
		acc <- res{c, err}
	}()
	c, err := p.d.DialContext(ctx, "tcp", p.ln.Addr().String())
	require.NoError(t, err)
	var r res
	select {
	case r = <-acc:
	case <-ctx.Done():
		t.Fatal("accept: hang")
	}
	require.NoError(t, r.err)
	t.Cleanup(func() { c.Close(); r.c.Close() })
	return c, r.c
}

// requireMode checks a connection's mode.
func requireMode(t testing.TB, c net.Conn, want smcr.Mode) smcr.ConnInfo {
	t.Helper()
	i, ok := smcr.Info(c)
	require.True(t, ok)
	require.Equal(t, want, i.Mode, "%+v", i)
	return i
}

// noLeaks checks, after the test's cleanups, that every goroutine of the
// package stopped and every device closed once the link groups lingered
// out.
func noLeaks(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second) // hang guard only
		for {
			buf := make([]byte, 1<<20)
			s := string(buf[:runtime.Stack(buf, true)])
			busy := strings.Contains(s, "goroce/smcr.") || strings.Contains(s, "goroce/rocev2/device.")
			if !busy && smcr.OpenStacks() == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("goroutines or devices left after the test (%d stacks):\n%s", smcr.OpenStacks(), s)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// pattern fills b with a position-dependent pattern seeded by seed.
func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*7 + seed*13 + i>>8)
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// waitFor polls cond until it holds; limit only guards against a hang.
func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached in %v", limit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
