//go:build linux

package udp

import (
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/race"
	"github.com/goroce/goroce/rocev2/backend"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopbackPair opens a sender on 127.0.0.1 and a receiver on 127.0.0.2. A
// watchdog closes both if the test outlives timeout, which wakes a Receive
// waiting for packets that were lost.
func loopbackPair(tb testing.TB, gso, gro bool, timeout time.Duration) (a, b *Backend, timedOut *atomic.Bool) {
	cfg := Config{DisableGSO: !gso, DisableGRO: !gro}
	cfg.Addr = netip.MustParseAddrPort("127.0.0.1:0")
	a = open(tb, cfg)
	cfg.Addr = netip.MustParseAddrPort("127.0.0.2:0")
	b = open(tb, cfg)
	timedOut = new(atomic.Bool)
	watchdog := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		a.Close()
		b.Close()
	})
	tb.Cleanup(func() { watchdog.Stop() })
	return a, b, timedOut
}

// roundTrip sends pkts from a and receives as many at b.
func roundTrip(a, b *Backend, pkts []backend.Outgoing, rx []backend.Incoming) (bad int, err error) {
	if err := a.Send(pkts); err != nil {
		return 0, err
	}
	for n := 0; n < len(pkts); {
		k, err := b.Receive(rx)
		if err != nil {
			return bad, err
		}
		for _, d := range rx[:k] {
			if d.ICRC != backend.ICRCOK {
				bad++
			}
		}
		n += k
	}
	return bad, nil
}

func TestDataPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	for _, tc := range []struct {
		name     string
		gso, gro bool
	}{
		{"gso+gro", true, true},
		{"plain", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, timedOut := loopbackPair(t, tc.gso, tc.gro, 20*time.Second)
			sizes := make([]int, a.BatchSize())
			for i := range sizes {
				sizes[i] = 1024
			}
			pkts := packets(t, rand.New(rand.NewPCG(15, 16)), b.LocalAddr(), sizes)
			rx := make([]backend.Incoming, b.BatchSize())
			var bad int
			var err error
			allocs := testing.AllocsPerRun(50, func() {
				var k int
				k, err = roundTrip(a, b, pkts, rx)
				bad += k
			})
			require.False(t, timedOut.Load(), "timed out")
			require.NoError(t, err)
			assert.Zero(t, bad, "packets with a bad ICRC")
			assert.Zero(t, allocs, "allocations per batch of %d", len(pkts))
		})
	}
}
