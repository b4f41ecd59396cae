package cq

import (
	"sync"
	"sync/atomic"
	"testing"

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
