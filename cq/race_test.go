package cq

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
