// Package cqtest holds the checks every completion design (a cq.Allocator)
// runs: cq's pool in each of its poll contexts, and the legacy design the
// benchmarks bring (internal/cqlegacy), as backendtest holds what every
// backend runs.
package cqtest

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
)

// Design is a completion design under test.
type Design struct {
	Name string
	// New makes the design, running to completion on devices if any.
	New func(devices []cq.Device) cq.Allocator
	// Reserve reserves n entries for one queue pair.
	Reserve func(a cq.Allocator, n int) (cq.Reservation, error)
	// Moderate, if the design moderates, holds a reservation's events
	// until comps completions or period.
	Moderate func(r cq.Reservation, comps int, period time.Duration)
	// Goroutines are stack frames of the design's goroutines: none may be
	// left after Close.
	Goroutines []string
}

// Run runs every shared check on d.
func Run(t *testing.T, d Design) {
	t.Run("entries run exactly once", func(t *testing.T) { EntriesRunExactlyOnce(t, d) })
	t.Run("close stops its goroutines", func(t *testing.T) { CloseStopsGoroutines(t, d) })
	t.Run("a receive batch runs the CQs it fired", func(t *testing.T) { ReceiveBatchRunsTheCQsItFired(t, d) })
	t.Run("a receive batch ending after Close runs nothing", func(t *testing.T) { ReceiveBatchEndingAfterCloseRunsNothing(t, d) })
	t.Run("arm/missed-event stress", func(t *testing.T) { ArmMissedEventStress(t, d, 0, false) })
	t.Run("arm/missed-event stress run to completion", func(t *testing.T) { ArmMissedEventStress(t, d, 0, true) })
	if d.Moderate != nil {
		t.Run("arm/missed-event stress moderated", func(t *testing.T) { ArmMissedEventStress(t, d, 4, false) })
		t.Run("arm/missed-event stress moderated run to completion", func(t *testing.T) { ArmMissedEventStress(t, d, 4, true) })
	}
}

// hangGuard is how long a check waits for something that must happen
// before declaring a hang. It bounds failures only; nothing is timed on
// success.
const hangGuard = 30 * time.Second

func guardCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// waitFor blocks until cond holds, yielding in between; it fails the test
// only if cond never holds within the hang guard.
func waitFor(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			require.FailNow(t, "hang: "+what)
		}
		runtime.Gosched()
	}
}

// newAlloc makes d on devices; the test's cleanup closes it.
func newAlloc(t testing.TB, d Design, devices ...cq.Device) cq.Allocator {
	a := d.New(devices)
	t.Cleanup(func() { a.Close() })
	return a
}

// push pushes wc and delivers the CQ's event as a queue pair does once it
// has released its lock.
func push(c *cq.CQ, wc *cq.WC, solicited bool) error {
	fired, err := c.Push(wc, solicited)
	c.Notify(fired, err)
	return err
}

// CountEntry counts its completions and runs Then, if set, inside Done.
type CountEntry struct {
	N    atomic.Int64
	Then func(wc *cq.WC)
}

// Done implements cq.Entry.
func (e *CountEntry) Done(wc *cq.WC) {
	e.N.Add(1)
	if e.Then != nil {
		e.Then(wc)
	}
}

// onceEntry must complete exactly once.
type onceEntry struct {
	fired atomic.Int32
	total *atomic.Int64
}

func (e *onceEntry) Done(*cq.WC) {
	e.fired.Add(1)
	e.total.Add(1)
}

// chainEntry completes, then pushes its followers from inside Done.
type chainEntry struct {
	*onceEntry
	next []*onceEntry
	push func(*onceEntry)
}

func (c *chainEntry) Done(wc *cq.WC) {
	c.onceEntry.Done(wc)
	for _, e := range c.next {
		c.push(e)
	}
}

// NoGoroutines waits until no goroutine runs a frame of frames.
func NoGoroutines(t testing.TB, frames ...string) {
	t.Helper()
	waitFor(t, guardCtx(t), "the design's goroutines to stop", func() bool {
		buf := make([]byte, 1<<20)
		s := string(buf[:runtime.Stack(buf, true)])
		for _, f := range frames {
			if strings.Contains(s, f) {
				return false
			}
		}
		return true
	})
}

// EntriesRunExactlyOnce: every pushed completion reaches its own entry
// exactly once, with handlers that push more work from inside Done (as a
// ULP posts from its completion handler).
func EntriesRunExactlyOnce(t *testing.T, d Design) {
	p := newAlloc(t, d)
	const leases, per, chained = 8, 300, 2
	var total atomic.Int64
	var wg sync.WaitGroup
	var entries [][]*onceEntry
	for i := 0; i < leases; i++ {
		l, err := d.Reserve(p, per*(1+chained))
		require.NoError(t, err)
		qpn := uint32(100 + i)
		l.Bind(qpn)
		list := make([]*onceEntry, 0, per*(1+chained))
		pushE := func(e *onceEntry) {
			wrid, entry := l.Tag(e)
			require.NoError(t, push(l.SendCQ(), &cq.WC{WRID: wrid, Entry: entry, QPNum: qpn}, false))
		}
		for j := 0; j < per; j++ {
			// The first entry of each chain pushes the next ones from
			// its Done.
			chain := make([]*onceEntry, 1+chained)
			for k := range chain {
				chain[k] = &onceEntry{total: &total}
			}
			list = append(list, chain...)
			head := &chainEntry{onceEntry: chain[0], next: chain[1:], push: pushE}
			wg.Add(1)
			go func() {
				defer wg.Done()
				wrid, entry := l.Tag(head)
				if err := push(l.SendCQ(), &cq.WC{WRID: wrid, Entry: entry, QPNum: qpn}, false); err != nil {
					t.Error(err)
				}
			}()
		}
		entries = append(entries, list)
	}
	wg.Wait()
	ctx := guardCtx(t)
	want := int64(leases * per * (1 + chained))
	waitFor(t, ctx, "all completions", func() bool { return total.Load() == want })
	for _, list := range entries {
		for _, e := range list {
			require.Equal(t, int32(1), e.fired.Load())
		}
	}
	s := p.Stats()
	assert.Equal(t, uint64(want), s.Completions)
	assert.Zero(t, s.Orphans)
	assert.NotZero(t, s.Wakeups)
}

// CloseStopsGoroutines: Close stops every goroutine of the design, even
// with work queued, and a second Close is harmless.
func CloseStopsGoroutines(t *testing.T, d Design) {
	a := d.New(nil)
	for range 3 {
		l, err := d.Reserve(a, 16)
		require.NoError(t, err)
		require.NoError(t, push(l.SendCQ(), &cq.WC{Entry: &CountEntry{}}, false))
	}
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	NoGoroutines(t, d.Goroutines...)
}
