package cq

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Managed is a CQ whose completions are handed to their entries (Entry.Done)
// by a poll context, like a kernel CQ from ib_alloc_cq or the CQ pool. Its
// queue pairs use CQ() as both send and receive CQ.
//
// Work requests on a Managed CQ should name an Entry; a completion without
// one goes to the pool's OnOrphan (it is normal only for flushed requests).
//
// Moderation (ibv_modify_cq's cq_count and cq_period, which DIM sets) is
// the Managed's, not the CQ's: an event raised outside a receive batch
// waits until Comps completions are waiting or Period has passed. Inside a
// receive batch (run to completion) the batch is the moderation already:
// its end runs what it fired.
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

	mod moderation

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

// moderation is a Managed's event moderation.
type moderation struct {
	mu      sync.Mutex
	comps   int
	period  time.Duration
	timer   *time.Timer
	waiting bool // the period timer runs for a held event
	closed  bool
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
	m := &Managed{ctx: ctx, vector: vector, rq: rq, orphan: orphan, wcs: make([]WC, PollBatch)}
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

// SetModeration sets the event moderation (ibv_modify_cq): an event raised
// outside a receive batch runs the CQ once comps completions are waiting,
// or period after it was raised if fewer arrive. comps <= 1 turns
// moderation off. DIM calls it with its profiles.
func (m *Managed) SetModeration(comps int, period time.Duration) {
	m.mod.mu.Lock()
	defer m.mod.mu.Unlock()
	// A held event keeps its timer: it runs no later than it would have,
	// so lowering the moderation strands nothing.
	m.mod.comps, m.mod.period = comps, period
}

// Moderation returns the current moderation (comps, period).
func (m *Managed) Moderation() (int, time.Duration) {
	m.mod.mu.Lock()
	defer m.mod.mu.Unlock()
	return m.mod.comps, m.mod.period
}

// Process handles up to budget completions on the calling goroutine, in
// batches of PollBatchDirect, and returns how many (ib_process_cq_direct).
// It is meant for PollDirect CQs; callers are serialized.
func (m *Managed) Process(budget int) int {
	m.directMu.Lock()
	defer m.directMu.Unlock()
	m.wakeups.Add(1)
	return m.process(budget, PollBatchDirect)
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

// onEvent is the CQ's completion handler (the comp_handler): it schedules
// the CQ's poller, unless moderation holds the event back.
func (m *Managed) onEvent() {
	if m.moderated() {
		return
	}
	m.schedule()
}

func (m *Managed) schedule() {
	if m.queued.CompareAndSwap(false, true) {
		m.rq.enqueue(m, true)
	}
}

// moderated decides whether an event waits for more completions. It waits
// when moderation is on, no receive batch is in progress (whose end runs
// the CQ anyway), and fewer than comps completions are waiting: the CQ is
// armed again so that the next completion is counted too, and the first
// held event starts the period timer, so a lone completion is never
// stranded. (A Go timer fires no sooner than the runtime's netpoller wakes,
// about a millisecond in an idle process, which is why moderation is off
// inside receive batches.)
func (m *Managed) moderated() bool {
	md := &m.mod
	md.mu.Lock()
	defer md.mu.Unlock()
	if md.comps <= 1 || md.closed || m.rq.inBatch() || m.cq.Len() >= md.comps {
		if md.waiting && md.timer != nil {
			md.timer.Stop()
			md.waiting = false
		}
		return false
	}
	if !md.waiting {
		md.waiting = true
		if md.timer == nil {
			md.timer = time.AfterFunc(md.period, m.periodOver)
		} else {
			md.timer.Reset(md.period)
		}
	}
	if m.cq.Arm(false) && m.cq.Len() >= md.comps {
		md.timer.Stop()
		md.waiting = false
		return false
	}
	return true
}

// periodOver runs a CQ whose held event waited the whole period.
func (m *Managed) periodOver() {
	m.mod.mu.Lock()
	run := m.mod.waiting && !m.mod.closed
	m.mod.waiting = false
	m.mod.mu.Unlock()
	if run {
		m.schedule()
	}
}

// close stops the moderation timer and closes the CQ.
func (m *Managed) close() {
	m.mod.mu.Lock()
	m.mod.closed = true
	if m.mod.timer != nil {
		m.mod.timer.Stop()
	}
	m.mod.mu.Unlock()
	m.cq.Close()
}

// run is one scheduled poller run. It reports whether the CQ must be run
// again (budget exhausted, or completions slipped in before the re-arm),
// and how many completions it handled; the CQ then stays marked queued and
// the caller puts it back on the tail of its run queue, behind the other
// CQs waiting there.
//
// inBatch says a receive batch's end runs it, inside the device's run;
// otherwise run opens one of its own on the pool's devices.
func (m *Managed) run(inBatch bool) (again bool, handled int) {
	m.wakeups.Add(1)
	if inBatch {
		m.inlineRuns.Add(1)
	}
	budget := m.ctx.budget()
	if !inBatch {
		beginRun(m.devices)
	}
	n := m.process(budget, PollBatch)
	if !inBatch {
		endRun(m.devices)
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
