package cq

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The poll/arm race: a completion pushed after the poller's last short poll
// but before its re-arm raises no event. Only "report missed events" makes
// the poller run again for it. Producers push tiny bursts and wait for them
// each round, so the poller goes idle and re-arms thousands of times, with
// pushes landing on either side of the arm; a stranded completion hangs the
// round (and fails at the hang guard).
func TestArmMissedEventStress(t *testing.T) {
	pool := func(cfg PoolConfig) func([]Device) Allocator {
		return func(d []Device) Allocator { cfg.Devices = d; return NewPool(cfg) }
	}
	legacy := func(d []Device) Allocator { return NewLegacy(LegacyConfig{Devices: d}) }
	for _, tc := range []struct {
		name       string
		new        func([]Device) Allocator
		reserve    func(Allocator, int) (Reservation, error)
		moderation int  // forced moderation comps (0: as configured)
		rtc        bool // half the producers push inside receive batches (PoolConfig.Devices)
	}{
		{"softirq", pool(PoolConfig{Vectors: 2, NoDIM: true}), reserveIn(PollSoftIRQ), 0, false},
		{"softirq moderated", pool(PoolConfig{Vectors: 2, NoDIM: true}), reserveIn(PollSoftIRQ), 4, false},
		{"softirq DIM", pool(PoolConfig{Vectors: 2}), reserveIn(PollSoftIRQ), 0, false},
		{"workqueue", pool(PoolConfig{Vectors: 2, Workers: 4, NoDIM: true}), reserveIn(PollWorkqueue), 0, false},
		{"legacy", legacy, Allocator.Reserve, 0, false},
		{"softirq run to completion", pool(PoolConfig{Vectors: 2}), reserveIn(PollSoftIRQ), 0, true},
		{"softirq run to completion moderated", pool(PoolConfig{Vectors: 2, NoDIM: true}), reserveIn(PollSoftIRQ), 4, true},
		{"workqueue run to completion", pool(PoolConfig{Vectors: 2, Workers: 2, NoDIM: true}), reserveIn(PollWorkqueue), 0, true},
		{"legacy run to completion", legacy, Allocator.Reserve, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := newRxDevice()
			var devs []Device
			if tc.rtc {
				devs = []Device{dev}
			}
			a := newAlloc(t, allocMode{tc.name, tc.new, tc.reserve}, devs...)
			l, err := tc.reserve(a, 64)
			require.NoError(t, err)
			l.Bind(1)
			if tc.moderation > 0 {
				l.(*Lease).Managed().SetModeration(tc.moderation, 2*time.Microsecond)
			}
			const producers, rounds = 4, 1500
			var handled atomic.Int64
			e := &countEntry{then: func(*WC) { handled.Add(1) }}
			ctx := guardCtx(t)
			want := int64(0)
			for r := 0; r < rounds; r++ {
				var wg sync.WaitGroup
				for i := 0; i < producers; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if i%2 == 1 {
							runtime.Gosched() // spread pushes around the arm
						}
						pushOne := func() {
							wrid, entry := l.Tag(e)
							if err := push(l.SendCQ(), &WC{WRID: wrid, Entry: entry, QPNum: 1}, false); err != nil {
								t.Error(err)
							}
						}
						if tc.rtc && i < producers/2 {
							dev.rx(pushOne) // concurrent batches, as from several devices
						} else {
							pushOne()
						}
					}()
				}
				wg.Wait()
				want += producers
				waitFor(t, ctx, "a stranded completion", func() bool { return handled.Load() == want })
			}
			assert.Equal(t, uint64(want), a.Stats().Completions)
		})
	}
}

// A CQ whose handlers keep it full forever must not starve other CQs:
// neither another CQ on its own vector (the budget sends it to the back of
// the run queue) nor one on another vector. The flood only stops after the
// others were served, so a starving poller hangs the test.
func TestBudgetFairness(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  PoolConfig
		pc   PollContext
	}{
		{"softirq", PoolConfig{Vectors: 2, MinCQE: 64}, PollSoftIRQ},
		{"workqueue one worker", PoolConfig{Vectors: 2, Workers: 1, MinCQE: 64}, PollWorkqueue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, tc.cfg)
			flood, err := p.Get(64, 0, tc.pc) // fills a whole CQ on vector 0
			require.NoError(t, err)
			same, err := p.Get(64, 0, tc.pc) // another CQ on vector 0
			require.NoError(t, err)
			other, err := p.Get(64, 1, tc.pc)
			require.NoError(t, err)
			require.NotSame(t, flood.SendCQ(), same.SendCQ())
			require.Equal(t, flood.Vector(), same.Vector())
			require.NotEqual(t, flood.Vector(), other.Vector())

			var stop atomic.Bool
			var flooded atomic.Int64
			var repush *countEntry
			repush = &countEntry{then: func(*WC) {
				flooded.Add(1)
				if !stop.Load() {
					_ = push(flood.SendCQ(), &WC{Entry: repush}, false)
				}
			}}
			for i := 0; i < 32; i++ {
				require.NoError(t, push(flood.SendCQ(), &WC{Entry: repush}, false))
			}
			ctx := guardCtx(t)
			waitFor(t, ctx, "the flood to start", func() bool { return flooded.Load() > 4*BudgetIRQ })

			for _, victim := range []*Lease{same, other} {
				got := &countEntry{}
				for i := 0; i < 50; i++ {
					require.NoError(t, push(victim.SendCQ(), &WC{Entry: got}, false))
				}
				waitFor(t, ctx, "a starved CQ", func() bool { return got.n.Load() == 50 })
			}
			stop.Store(true)
			require.NoError(t, flood.Drain(ctx))
			assert.Greater(t, flood.Managed().Stats().Wakeups, uint64(1), "the flood yielded")
		})
	}
}
