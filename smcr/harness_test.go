package smcr_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/smcr"
)

// Every test gets two loopback addresses of its own (.1 for the server's
// device, .2 for the client's), so its link groups are its own and no test
// reuses another's. The sequence starts at a random point: other test
// processes (other packages, other checkouts) may run SMC-R devices at the
// same time; a server address found in use is skipped.
var nextNet = func() *atomic.Uint32 {
	var n atomic.Uint32
	n.Store(rand.Uint32N(1 << 15))
	return &n
}()

// freshAddrs returns the next pair of test addresses: 127.(64..191).x.1
// and .2 (.3 to .254 stay free for further devices of the same test).
func freshAddrs() (srv, cli netip.Addr) {
	n := nextNet.Add(1) % (1 << 15)
	b, c := byte(64+n>>8), byte(n)
	return netip.AddrFrom4([4]byte{127, b, c, 1}), netip.AddrFrom4([4]byte{127, b, c, 2})
}

// pair is a listener and a dialer on fresh devices.
type pair struct {
	ln  net.Listener
	d   smcr.Dialer
	cfg smcr.Config

	acceptOnce sync.Once
	acc        chan accepted
}

// testConfig is SMC-R without the TCP option (tests run unprivileged too),
// a UEID for v2, and a short linger so that link groups end with the test.
func testConfig() smcr.Config {
	return smcr.Config{
		Signalling: smcr.SignalConfigured, PeerSpeaksSMC: true, UEIDs: []string{"GOROCE-TEST-UEID"},
		LinkGroupLinger: 20 * time.Millisecond, HandshakeTimeout: 10 * time.Second,
		WrapBackend: func(b backend.Backend) backend.Backend {
			if w := testWrap.Load(); w != nil {
				return (*w)(b)
			}
			return b
		},
	}
}

func newPair(t testing.TB, mod func(*smcr.Config)) *pair {
	return newPairWith(t, nil, mod)
}

// newPairWith is newPair whose sides get the devices devs returns for the
// pair's server and client addresses (nil: one each, on that address).
func newPairWith(t testing.TB, devs func(srv, cli netip.Addr, c *smcr.Config) (server, client []netip.Addr), mod func(*smcr.Config)) *pair {
	t.Helper()
	cfg := testConfig()
	if mod != nil {
		mod(&cfg)
	}
	var (
		ln      net.Listener
		cli     netip.Addr
		cliDevs []netip.Addr
		err     error
	)
	for range 50 {
		var srv netip.Addr
		srv, cli = freshAddrs()
		sc := cfg
		if devs != nil {
			sc.Devices, cliDevs = devs(srv, cli, &cfg)
		}
		ln, err = smcr.Listen("tcp", netip.AddrPortFrom(srv, 0).String(), &sc)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	cc := cfg
	cc.Devices = cliDevs
	return &pair{ln: ln, d: smcr.Dialer{Config: cc, LocalAddr: cli}, cfg: cfg}
}

// dial returns a connected client and server.
func (p *pair) dial(t testing.TB) (client, server net.Conn) {
	t.Helper()
	c, s, err := p.tryDial(t)
	require.NoError(t, err)
	return c, s
}

// tryDial is dial that returns the dialer's error.
func (p *pair) tryDial(t testing.TB) (client, server net.Conn, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := p.d.DialContext(ctx, "tcp", p.ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { c.Close() })
	for {
		select {
		case r, ok := <-p.accepted():
			if !ok {
				return nil, nil, errors.New("the listener closed")
			}
			if r.c.RemoteAddr().String() != c.LocalAddr().String() {
				r.c.Close() // the server side of an earlier failed dial
				continue
			}
			t.Cleanup(func() { r.c.Close() })
			return c, r.c, nil
		case <-ctx.Done():
			t.Fatal("accept: hang")
		}
	}
}

type accepted struct{ c net.Conn }

// accepted returns the connections the pair's listener accepts, from one
// goroutine that runs until the listener closes.
func (p *pair) accepted() <-chan accepted {
	p.acceptOnce.Do(func() {
		p.acc = make(chan accepted, 16)
		go func() {
			for {
				c, err := p.ln.Accept()
				if err != nil {
					close(p.acc)
					return
				}
				p.acc <- accepted{c: c}
			}
		}()
	})
	return p.acc
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

// pattern fills b with a position-dependent pattern seeded by seed. It
// repeats at no buffer size: a byte the peer never wrote, read where the
// same place of the RMB held an earlier one, shows.
func pattern(b []byte, seed int) {
	for i := range b {
		x := uint32(i)*2654435761 + uint32(seed)*40503
		b[i] = byte(x>>24 ^ x>>11)
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
