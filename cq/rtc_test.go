package cq

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rxDevice is a Device whose receive batches the test runs (rx), as a
// device's receive goroutine does, and which counts its send batches.
type rxDevice struct {
	mu    sync.Mutex
	hooks map[int][2]func()
	next  int

	open  atomic.Int32 // BeginRun minus EndRun
	ended atomic.Int64 // EndRun calls
}

func newRxDevice() *rxDevice { return &rxDevice{hooks: map[int][2]func(){}} }

func (f *rxDevice) BeginRun() { f.open.Add(1) }
func (f *rxDevice) EndRun()   { f.open.Add(-1); f.ended.Add(1) }

func (f *rxDevice) OnReceiveBatch(begin, end func()) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := f.next
	f.hooks[id] = [2]func(){begin, end}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.hooks, id)
	}
}

func (f *rxDevice) registered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hooks)
}

// rx runs deliver as one receive batch, as the device does: inside a run,
// between the hooks' begin and end.
func (f *rxDevice) rx(deliver func()) {
	f.mu.Lock()
	var hooks [][2]func()
	for _, h := range f.hooks {
		hooks = append(hooks, h)
	}
	f.mu.Unlock()
	f.BeginRun()
	defer f.EndRun()
	for _, h := range hooks {
		h[0]()
	}
	deliver()
	for _, h := range hooks {
		h[1]()
	}
}

// With Devices, the CQs that a receive batch fires run on the receive
// goroutine when the batch ends, inside one send batch of the device;
// moderation does not hold them back there; and a completion pushed outside
// a batch still reaches its handler (a poller goroutine runs it). (A poller
// goroutine that happens to be awake, as when it starts, may take a fired
// CQ before the batch ends: allowed, it runs once either way.)
func TestReceiveBatchRunsTheCQsItFired(t *testing.T) {
	for _, tc := range allocModes {
		t.Run(tc.name, func(t *testing.T) {
			dev := newRxDevice()
			p := newAlloc(t, tc, dev)
			require.Equal(t, 1, dev.registered())
			var leases []Reservation
			qpns := map[Reservation]uint32{}
			for i := 0; i < 3; i++ { // CQs on both vectors
				l, err := tc.reserve(p, 16)
				require.NoError(t, err)
				l.Bind(uint32(i + 1))
				qpns[l] = uint32(i + 1)
				if pl, ok := l.(*Lease); ok {
					// Moderation that would hold a lone completion for an hour.
					pl.Managed().SetModeration(8, time.Hour)
				}
				leases = append(leases, l)
			}
			var inRun, outside atomic.Int64
			e := &countEntry{then: func(*WC) {
				if dev.open.Load() > 0 {
					inRun.Add(1)
				} else {
					outside.Add(1)
				}
			}}
			pushN := func(l Reservation, n int, st Status) {
				for i := 0; i < n; i++ {
					wrid, entry := l.Tag(e)
					require.NoError(t, push(l.RecvCQ(), &WC{WRID: wrid, Entry: entry, QPNum: qpns[l], Status: st}, false))
				}
			}
			ctx := guardCtx(t)
			for round := 1; round <= 50; round++ {
				dev.rx(func() {
					for _, l := range leases {
						pushN(l, 1, Success)
					}
				})
				// An hour of moderation would hang here.
				waitFor(t, ctx, "completions of a receive batch", func() bool { return e.n.Load() == int64(3*round) })
			}
			st := p.Stats()
			assert.Greater(t, st.InlineRuns, st.Wakeups*3/4, "the runs were on the receive goroutine: %+v", st)
			assert.EqualValues(t, 150, inRun.Load(), "every handler ran inside a run of the device")
			assert.Zero(t, outside.Load())
			assert.Zero(t, dev.open.Load(), "every BeginRun was ended")

			// Outside a receive batch a poller goroutine runs it (after
			// the period, for the moderated pools: lower it first).
			if pl, ok := leases[0].(*Lease); ok {
				pl.Managed().SetModeration(8, time.Microsecond)
			}
			pushN(leases[0], 1, Success)
			waitFor(t, ctx, "a completion pushed outside a receive batch", func() bool { return e.n.Load() == 151 })

			require.NoError(t, p.Close())
			assert.Zero(t, dev.registered(), "Close removes the hooks")
			dev.rx(func() {}) // a batch after Close runs nothing and does not panic
		})
	}
}

// A CQ whose handlers keep it full does not keep the receive goroutine:
// the end of a receive batch runs it for at most about RxBudget
// completions, then leaves it to the poller goroutine, which goes on with
// it. (How much of the flood the receive goroutine ran before it returned
// is not fixed: a poller goroutine that is awake may take the CQ first.)
func TestReceiveBatchHandsAFloodToThePoller(t *testing.T) {
	dev := newRxDevice()
	p := newTestPool(t, PoolConfig{Vectors: 2, MinCQE: 64, Devices: []Device{dev}})
	flood, err := p.Get(64, 0, PollSoftIRQ)
	require.NoError(t, err)
	var stop atomic.Bool
	var handled atomic.Int64
	var repush *countEntry
	repush = &countEntry{then: func(*WC) {
		handled.Add(1)
		if !stop.Load() {
			_ = push(flood.SendCQ(), &WC{Entry: repush}, false)
		}
	}}
	returned := make(chan int64, 1)
	go func() {
		dev.rx(func() {
			for i := 0; i < 32; i++ {
				_ = push(flood.SendCQ(), &WC{Entry: repush}, false)
			}
		})
		returned <- handled.Load()
	}()
	ctx := guardCtx(t)
	var atReturn int64
	select {
	case atReturn = <-returned:
	case <-ctx.Done():
		require.FailNow(t, "hang: the receive batch never returned from the flood")
	}
	waitFor(t, ctx, "the poller goroutine to go on with the flood", func() bool { return handled.Load() > atReturn+4*BudgetIRQ })
	stop.Store(true)
	require.NoError(t, flood.Drain(ctx))
}

// A receive batch that began before Close and ends after it runs no
// handler: Close waits for batches running CQs, and later ends do nothing.
// (A poller goroutine that is awake may run the fired CQ before Close
// returns; nothing may run after.)
func TestReceiveBatchEndingAfterCloseRunsNothing(t *testing.T) {
	for _, tc := range allocModes {
		t.Run(tc.name, func(t *testing.T) {
			dev := newRxDevice()
			p := tc.new([]Device{dev})
			l, err := tc.reserve(p, 16)
			require.NoError(t, err)
			l.Bind(7)
			e := &countEntry{}
			var atClose int64
			dev.rx(func() {
				wrid, entry := l.Tag(e)
				require.NoError(t, push(l.RecvCQ(), &WC{WRID: wrid, Entry: entry, QPNum: 7}, false))
				require.NoError(t, p.Close())
				atClose = e.n.Load()
			})
			assert.Equal(t, atClose, e.n.Load(), "a handler ran after Close")
			noPoolGoroutines(t)
		})
	}
}
