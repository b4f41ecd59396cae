package cq

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	p := NewPool(cfg)
	t.Cleanup(func() { p.Close() })
	return p
}

// Get picks the vector asked for (or round-robin), shares a CQ while it has
// room, allocates one CQ per vector when none has, and Put gives room back.
func TestPoolGetPlacementAndCapacity(t *testing.T) {
	p := newTestPool(t, PoolConfig{Vectors: 3, MinCQE: 100})
	type get struct {
		n, hint    int
		wantVector int
		wantCQs    int // pool CQs after the Get
	}
	var leases []*Lease
	for i, g := range []get{
		{n: 40, hint: 1, wantVector: 1, wantCQs: 3},
		{n: 60, hint: 4, wantVector: 1, wantCQs: 3},  // 4 mod 3; fills CQ 1 exactly
		{n: 1, hint: 1, wantVector: 1, wantCQs: 6},   // no room on vector 1: a new batch
		{n: 10, hint: -1, wantVector: 0, wantCQs: 6}, // round-robin starts at 0
		{n: 10, hint: -1, wantVector: 1, wantCQs: 6},
		{n: 10, hint: -1, wantVector: 2, wantCQs: 6},
		{n: 500, hint: 0, wantVector: 0, wantCQs: 9}, // bigger than MinCQE: CQs of 500
	} {
		l, err := p.Get(g.n, g.hint, PollSoftIRQ)
		require.NoError(t, err, "get %d", i)
		assert.Equal(t, g.wantVector, l.Vector(), "get %d", i)
		assert.Len(t, p.CQs(), g.wantCQs, "get %d", i)
		assert.Same(t, l.SendCQ(), l.RecvCQ(), "one CQ for send and receive")
		assert.GreaterOrEqual(t, l.SendCQ().Depth(), g.n)
		leases = append(leases, l)
	}
	assert.Equal(t, 40+60+1+10+10+10+500, p.Stats().Reserved)
	// No CQ holds more reservations than entries.
	for _, m := range p.CQs() {
		assert.LessOrEqual(t, m.used, m.cq.Depth())
	}
	for _, l := range leases {
		p.Put(l)
		p.Put(l) // a second Put is a no-op
	}
	assert.Zero(t, p.Stats().Reserved)
	// Returned room is reused: no new batch.
	_, err := p.Get(100, 1, PollSoftIRQ)
	require.NoError(t, err)
	assert.Len(t, p.CQs(), 9)
}

func TestPoolGetRejects(t *testing.T) {
	p := newTestPool(t, PoolConfig{Vectors: 1})
	for _, tc := range []struct {
		name string
		n    int
		pc   PollContext
	}{
		{"zero entries", 0, PollSoftIRQ},
		{"too many entries", MaxDepth + 1, PollSoftIRQ},
		{"direct is not pooled", 8, PollDirect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Get(tc.n, 0, tc.pc)
			require.Error(t, err)
		})
	}
	require.NoError(t, p.Close())
	_, err := p.Get(1, 0, PollSoftIRQ)
	require.ErrorIs(t, err, ErrPoolClosed)
}

// Completions without an Entry go to OnOrphan, not lost, not a crash.
func TestOrphans(t *testing.T) {
	var orphans atomic.Int64
	p := newTestPool(t, PoolConfig{Vectors: 1, OnOrphan: func(wc *WC) { orphans.Add(1) }})
	l, err := p.Get(4, 0, PollSoftIRQ)
	require.NoError(t, err)
	require.NoError(t, push(l.SendCQ(), &WC{WRID: 7, Status: WRFlushErr}, false))
	require.NoError(t, l.Drain(guardCtx(t)))
	assert.Equal(t, int64(1), orphans.Load())
	assert.Equal(t, uint64(1), p.Stats().Orphans)
}

// Direct CQs run nothing by themselves; Process honors its budget.
func TestDirectProcessBudget(t *testing.T) {
	var got atomic.Int64
	m, err := NewDirect(64, nil)
	require.NoError(t, err)
	defer m.CQ().Close()
	e := &countEntry{then: func(*WC) { got.Add(1) }}
	for i := 0; i < 20; i++ {
		require.NoError(t, push(m.CQ(), &WC{Entry: e}, false))
	}
	for _, tc := range []struct{ budget, want int }{{5, 5}, {PollBatchDirect + 1, PollBatchDirect + 1}, {100, 6}, {100, 0}} {
		assert.Equal(t, tc.want, m.Process(tc.budget))
	}
	assert.Equal(t, int64(20), got.Load())
	require.NoError(t, push(m.CQ(), &WC{Entry: e}, false))
	require.NoError(t, m.Drain(guardCtx(t)), "drain processes a direct CQ itself")
	assert.Equal(t, int64(21), got.Load())
}
