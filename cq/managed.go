package cq

import (
	"context"
	"sync"
	"sync/atomic"
)

// Managed is a CQ whose completions are handed to their entries (Entry.Done)
// by a poll context, like a kernel CQ from ib_alloc_cq or the CQ pool. Its
// queue pairs use CQ() as both send and receive CQ.
//
// Work requests on a Managed CQ should name an Entry; a completion without
// one goes to the pool's OnOrphan (it is normal only for flushed requests).
type Managed struct {
	cq     *CQ
	ctx    PollContext
	vector int
	rq     *runQueue // nil for PollDirect
	dim    *DIM      // nil when moderation is off
	orphan func(*WC)
	// devices bracket every scheduled run (PoolConfig.Devices).
	devices []Device

	// queued is set from the moment the CQ is put on its run queue until
	// its run completes, so one CQ never runs on two goroutines at once and
	// never sits on a run queue twice (IRQ_POLL_F_SCHED / WORK_PENDING).
	queued   atomic.Bool
	wcs      []WC       // the runner's batch buffer
	directMu sync.Mutex // serializes Process

	wakeups    atomic.Uint64
	inlineRuns atomic.Uint64
	dispatched atomic.Uint64
	orphans    atomic.Uint64
	profile    atomic.Int32

	drainMu  sync.Mutex
	drainers []drainWaiter
	nDrain   atomic.Int32

	used int // reserved entries; guarded by the pool's mutex
}

type drainWaiter struct {
	target uint64
	ch     chan struct{}
}

// Stats are a Managed CQ's counters.
type Stats struct {
	Vector      int
	Wakeups     uint64 // poller runs (events handled, missed-event reruns included)
	InlineRuns  uint64 // of those, runs on a device's receive goroutine (PoolConfig.Devices)
	Completions uint64 // completions handed to handlers
	Orphans     uint64 // completions without an Entry
	Profile     int    // current DIM profile index, -1 without DIM
	Reserved    int    // entries reserved by pool users
	Depth       int
}

func newManaged(depth, vector int, ctx PollContext, rq *runQueue, withDIM bool, orphan func(*WC), onAsync func(error)) (*Managed, error) {
	m := &Managed{ctx: ctx, vector: vector, rq: rq, orphan: orphan, wcs: make([]WC, Batch)}
	m.profile.Store(-1)
	cfg := Config{OnAsyncError: onAsync}
	if ctx != PollDirect {
		cfg.OnEvent = m.onEvent
		if withDIM {
			m.dim = NewDIM()
			m.profile.Store(0)
		}
	}
	c, err := New(depth, cfg)
	if err != nil {
		return nil, err
	}
	m.cq = c
	if rq != nil && rq.inline != nil {
		// Run to completion (PoolConfig.Devices): the CQs fired during a
		// receive batch run once at its end, so the batch is the unit of
		// moderation already. A moderation timer on top would only delay
		// them (and a Go timer cannot keep DIM's microseconds: in an idle
		// process a 16 or 32 µs timer fires after ~1.1 ms, as the netpoller
		// sleeps in whole milliseconds). Moderation, DIM's or the user's,
		// applies to events raised outside receive batches, which wake a
		// poller goroutine.
		inline := rq.inline
		c.modGate = func() bool { return inline.Load() == 0 }
	}
	if ctx != PollDirect {
		// Armed once at creation (ib_alloc_cq), then by every run.
		c.Arm(false)
	}
	return m, nil
}

// NewDirect creates a Managed CQ in PollDirect context: the caller drives
// it with Process. orphan (optional) receives completions without an Entry.
func NewDirect(depth int, orphan func(*WC)) (*Managed, error) {
	return newManaged(depth, 0, PollDirect, nil, false, orphan, nil)
}

// CQ returns the underlying CQ, to give to a queue pair as its send and
// receive CQ. Do not Poll it directly: that would bypass the handlers.
func (m *Managed) CQ() *CQ { return m.cq }

// PollContext returns the CQ's poll context.
func (m *Managed) PollContext() PollContext { return m.ctx }

// Vector returns the completion vector the CQ's events run on.
func (m *Managed) Vector() int { return m.vector }

// Stats returns the CQ's counters.
func (m *Managed) Stats() Stats {
	return Stats{
		Vector:      m.vector,
		Wakeups:     m.wakeups.Load(),
		InlineRuns:  m.inlineRuns.Load(),
		Completions: m.dispatched.Load(),
		Orphans:     m.orphans.Load(),
		Profile:     int(m.profile.Load()),
		Depth:       m.cq.Depth(),
	}
}

// Process handles up to budget completions on the calling goroutine, in
// batches of BatchDirect, and returns how many (ib_process_cq_direct). It is
// meant for PollDirect CQs; callers are serialized.
func (m *Managed) Process(budget int) int {
	m.directMu.Lock()
	defer m.directMu.Unlock()
	m.wakeups.Add(1)
	return m.process(budget, BatchDirect)
}

// process polls and dispatches until a poll comes back short or budget
// completions were handled (__ib_process_cq).
func (m *Managed) process(budget, batch int) int {
	done := 0
	for done < budget {
		want := min(batch, budget-done)
		n := m.cq.Poll(m.wcs[:want])
		for i := 0; i < n; i++ {
			m.dispatch(&m.wcs[i])
			m.wcs[i] = WC{} // drop the Entry reference
		}
		done += n
		if n > 0 {
			m.dispatched.Add(uint64(n))
			if m.nDrain.Load() > 0 {
				m.wakeDrainers()
			}
		}
		if n < want {
			break
		}
	}
	return done
}

func (m *Managed) dispatch(wc *WC) {
	if wc.Entry != nil {
		wc.Entry.Done(wc)
		return
	}
	m.orphans.Add(1)
	if m.orphan != nil {
		m.orphan(wc)
	}
}

// onEvent is the CQ's completion handler (the comp_handler): it only
// schedules the CQ's poller.
func (m *Managed) onEvent() {
	if m.queued.CompareAndSwap(false, true) {
		m.rq.enqueue(m, true)
	}
}

// run is one scheduled poller run. It reports whether the CQ must be run
// again (budget exhausted, or completions slipped in before the re-arm),
// and how many completions it handled;
// the CQ then stays marked queued and the caller puts it back on the tail
// of its run queue, behind the other CQs waiting there.
//
// batched says the caller brackets the run with the devices' BeginBatch
// and EndBatch itself (a receive goroutine running several CQs sends what
// they all post at once); otherwise run does.
func (m *Managed) run(batched bool) (again bool, handled int) {
	m.wakeups.Add(1)
	if batched {
		m.inlineRuns.Add(1)
	}
	budget := m.ctx.budget()
	if !batched {
		beginBatch(m.devices)
	}
	n := m.process(budget, Batch)
	if !batched {
		endBatch(m.devices)
	}
	if m.dim != nil {
		m.feedDIM(n)
	}
	if n >= budget {
		return true, n
	}
	m.queued.Store(false)
	// Re-arm with "report missed events": completions pushed between the
	// last short poll and this arm raise no event, so run again for them.
	if m.cq.Arm(false) {
		return m.queued.CompareAndSwap(false, true), n
	}
	return false, n
}

// Drain waits until every completion pushed to the CQ before the call has
// been handled. Once a QP is destroyed, Drain guarantees that no Done of
// its work requests runs afterwards (ib_drain_qp's role). Do not call it
// from a handler of the same CQ: it would wait for itself.
func (m *Managed) Drain(ctx context.Context) error {
	target := m.cq.Pushed()
	if m.dispatched.Load() >= target {
		return nil
	}
	if m.ctx == PollDirect {
		for m.dispatched.Load() < target {
			if err := ctx.Err(); err != nil {
				return err
			}
			m.Process(BudgetIRQ)
		}
		return nil
	}
	w := drainWaiter{target: target, ch: make(chan struct{})}
	m.drainMu.Lock()
	m.drainers = append(m.drainers, w)
	m.nDrain.Add(1)
	m.drainMu.Unlock()
	m.wakeDrainers() // in case the poller finished before we registered
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		m.drainMu.Lock()
		for i, d := range m.drainers {
			if d.ch == w.ch {
				m.drainers = append(m.drainers[:i], m.drainers[i+1:]...)
				m.nDrain.Add(-1)
				break
			}
		}
		m.drainMu.Unlock()
		return ctx.Err()
	}
}

func (m *Managed) wakeDrainers() {
	done := m.dispatched.Load()
	m.drainMu.Lock()
	kept := m.drainers[:0]
	for _, d := range m.drainers {
		if done >= d.target {
			close(d.ch)
			m.nDrain.Add(-1)
		} else {
			kept = append(kept, d)
		}
	}
	m.drainers = kept
	m.drainMu.Unlock()
}
