package cq

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// ErrPoolClosed is returned by Get after Close.
var ErrPoolClosed = errors.New("cq: pool closed")

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Vectors is the number of completion vectors (softirq pollers);
	// 0 means GOMAXPROCS.
	Vectors int
	// Workers bounds the PollWorkqueue goroutines; 0 means Vectors.
	Workers int
	// MinCQE is the least entries of a pooled CQ; 0 means SharedCQSize.
	MinCQE int
	// NoDIM turns adaptive moderation off: every completion on an armed
	// CQ wakes its poller.
	NoDIM bool
	// OnOrphan, if set, receives completions that name no Entry.
	OnOrphan func(*WC)
	// OnAsyncError, if set, receives CQ overflows; with honest
	// reservations they cannot happen.
	OnAsyncError func(error)
	// Devices are the devices whose QPs use the pool. Given them, the pool
	// runs to completion: the CQs that a batch of received packets fires
	// run on the device's receive goroutine right after the batch (as a
	// kernel runs softirqs on the interrupted CPU at irq exit) instead of
	// waking a poller goroutine, and what the handlers of one run post
	// leaves together when the run ends. The poller goroutines still run
	// what fires outside a receive batch, and what a batch's end leaves
	// over its budget (RxBudget). Without Devices every CQ event wakes a
	// poller goroutine and every post sends at once.
	Devices []Device
}

// Pool hands out shared, pre-armed CQs whose completions run their
// entries' handlers (ib_cq_pool_get / ib_cq_pool_put). Callers reserve the
// send plus receive depth of their QP and use the one CQ for both queues;
// the pool never puts more reservations on a CQ than it holds, so such
// callers can never overflow it. CQs live until Close, never freed by Put.
type Pool struct {
	cfg     PoolConfig
	vectors []*runQueue // PollSoftIRQ, one goroutine each
	wq      *runQueue   // PollWorkqueue
	mu      sync.Mutex  // guards the fields below and Managed.used
	cqs     map[PollContext][]*Managed
	lastVec int
	closed  bool

	// Running CQs on the devices' receive goroutines (PoolConfig.Devices):
	// rxBatches counts the receive batches in progress, runMu is held by
	// each batch's end while it runs CQs (Close waits for them), removes
	// unregister the hooks.
	rxBatches atomic.Int32
	runMu     sync.RWMutex
	removes   []func()
	ended     bool // set by Close under runMu: late receive batches run nothing
}

var _ Allocator = (*Pool)(nil)

// NewPool starts a pool's pollers.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Vectors <= 0 {
		cfg.Vectors = runtime.GOMAXPROCS(0)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = cfg.Vectors
	}
	if cfg.MinCQE <= 0 {
		cfg.MinCQE = SharedCQSize
	}
	p := &Pool{cfg: cfg, cqs: map[PollContext][]*Managed{}, lastVec: -1}
	var rx *atomic.Int32
	if len(cfg.Devices) > 0 {
		rx = &p.rxBatches
	}
	p.vectors = make([]*runQueue, cfg.Vectors)
	for i := range p.vectors {
		p.vectors[i] = newRunQueue(1, rx)
	}
	p.wq = newRunQueue(cfg.Workers, rx)
	for _, d := range cfg.Devices {
		p.removes = append(p.removes, d.OnReceiveBatch(p.rxBegin, p.rxEnd))
	}
	return p
}

func (p *Pool) rxBegin() { p.rxBatches.Add(1) }

// rxEnd runs, on a device's receive goroutine, the CQs fired while its
// batch was in progress (see PoolConfig.Devices). The device's run is open
// around it, so what the handlers post leaves with the batch's answers.
func (p *Pool) rxEnd() {
	p.rxBatches.Add(-1)
	if !p.runMu.TryRLock() {
		return // closing
	}
	defer p.runMu.RUnlock()
	if p.ended {
		return // a batch that began before Close removed the hooks
	}
	budget := RxBudget
	for _, rq := range p.vectors {
		rq.runQueued(&budget)
	}
	p.wq.runQueued(&budget)
}

// Vectors returns the number of completion vectors.
func (p *Pool) Vectors() int { return p.cfg.Vectors }

// Reserve is Get(nCQE, -1, PollSoftIRQ): the Allocator's way.
func (p *Pool) Reserve(nCQE int) (Reservation, error) {
	l, err := p.Get(nCQE, -1, PollSoftIRQ)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Get reserves nCQE entries on a shared CQ of poll context pc on vector
// vectorHint modulo Vectors (a negative hint picks vectors round-robin) and
// returns the reservation. When no CQ of that vector has room, it allocates
// a batch — one CQ per vector, each of max(nCQE, MinCQE) entries.
func (p *Pool) Get(nCQE, vectorHint int, pc PollContext) (*Lease, error) {
	if nCQE < 1 || nCQE > MaxDepth {
		return nil, fmt.Errorf("cq: pool get: %d entries out of range 1..%d", nCQE, MaxDepth)
	}
	if pc != PollSoftIRQ && pc != PollWorkqueue {
		return nil, fmt.Errorf("cq: pool get: poll context %v cannot be pooled (use NewDirect)", pc)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	if vectorHint < 0 {
		p.lastVec = (p.lastVec + 1) % p.cfg.Vectors
		vectorHint = p.lastVec
	}
	vector := vectorHint % p.cfg.Vectors
	for attempt := 0; attempt < 2; attempt++ {
		for _, m := range p.cqs[pc] {
			if m.vector == vector && m.used+nCQE <= m.cq.Depth() {
				m.used += nCQE
				return &Lease{pool: p, m: m, n: nCQE}, nil
			}
		}
		if err := p.allocBatchLocked(nCQE, pc); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("cq: pool get: no room for %d entries after allocating", nCQE) // unreachable
}

func (p *Pool) allocBatchLocked(nCQE int, pc PollContext) error {
	depth := min(MaxDepth, max(nCQE, p.cfg.MinCQE))
	for v := 0; v < p.cfg.Vectors; v++ {
		rq := p.vectors[v]
		if pc == PollWorkqueue {
			rq = p.wq
		}
		m, err := newManaged(depth, v, pc, rq, !p.cfg.NoDIM, p.cfg.OnOrphan, p.cfg.OnAsyncError)
		if err != nil {
			return err
		}
		m.devices = p.cfg.Devices
		p.cqs[pc] = append(p.cqs[pc], m)
	}
	return nil
}

// Put returns a reservation. The CQ stays allocated for later Gets. Destroy
// the lease's QP and Drain the lease first if no handler may run later.
func (p *Pool) Put(l *Lease) {
	if l == nil || l.pool != p || !l.put.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l.m.used -= l.n
}

// CQs returns the pooled CQs.
func (p *Pool) CQs() []*Managed {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*Managed
	for _, pc := range []PollContext{PollSoftIRQ, PollWorkqueue} {
		out = append(out, p.cqs[pc]...)
	}
	return out
}

// PoolStats sums the counters of a pool's (or the legacy design's) CQs.
type PoolStats struct {
	CQs         int
	Wakeups     uint64
	InlineRuns  uint64 // wake-ups that ran on a device's receive goroutine
	Completions uint64
	Orphans     uint64
	Reserved    int
	// Profiles counts the CQs at each DIM profile (all zero without DIM).
	Profiles [len(DIMProfiles)]int
}

// CompsPerWakeup is the mean completions handled per poller wake-up.
func (s PoolStats) CompsPerWakeup() float64 {
	if s.Wakeups == 0 {
		return 0
	}
	return float64(s.Completions) / float64(s.Wakeups)
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s PoolStats
	for _, list := range p.cqs {
		for _, m := range list {
			st := m.Stats()
			s.CQs++
			s.Wakeups += st.Wakeups
			s.InlineRuns += st.InlineRuns
			s.Completions += st.Completions
			s.Orphans += st.Orphans
			s.Reserved += m.used
			if st.Profile >= 0 {
				s.Profiles[st.Profile]++
			}
		}
	}
	return s
}

// Close stops every poller goroutine (after its current run) and closes
// every CQ. Handlers must not block forever, or Close waits for them.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	for _, remove := range p.removes {
		remove()
	}
	p.runMu.Lock() // wait for receive batches running CQs
	p.ended = true
	p.runMu.Unlock()
	for _, v := range p.vectors {
		v.close()
	}
	p.wq.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range p.cqs {
		for _, m := range list {
			m.close()
		}
	}
	return nil
}
