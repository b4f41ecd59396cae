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
	// Legacy selects the pre-pool design for comparison (see legacy.go).
	Legacy bool
	// OnOrphan, if set, receives completions that name no Entry (and, in
	// legacy mode, whose wr_id matches no pending slot).
	OnOrphan func(*WC)
	// OnAsyncError, if set, receives CQ overflows; with honest
	// reservations they cannot happen.
	OnAsyncError func(error)
	// Devices are the devices whose QPs use the pool. Given them, both
	// designs run to completion: the CQs that a batch of received packets
	// fires run on the device's receive goroutine right after the batch
	// (as a kernel runs softirqs on the interrupted CPU at irq exit)
	// instead of waking a poller goroutine, and the sends that the handlers
	// of one run post leave together when the run ends (a doorbell per run,
	// like xmit_more in a NAPI run). The poller goroutines still run what
	// is fired outside a receive batch, and what a run leaves over its
	// budget. Without Devices every CQ event wakes a poller goroutine and
	// every post sends at once.
	Devices []Device
}

// Device is what a pool needs of a device its QPs live on;
// rocev2/device.Device implements it.
type Device interface {
	// BeginBatch and EndBatch bracket a poller run: the sends its handlers
	// post leave together at EndBatch.
	BeginBatch()
	EndBatch()
	// OnReceiveBatch registers functions that the device's receive
	// goroutine calls before and after each batch of packets it handles.
	OnReceiveBatch(begin, end func()) (remove func())
}

func beginBatch(bs []Device) {
	for _, b := range bs {
		b.BeginBatch()
	}
}

func endBatch(bs []Device) {
	for _, b := range bs {
		b.EndBatch()
	}
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
	legacy  *legacy
	mu      sync.Mutex // guards the fields below and Managed.used
	cqs     map[PollContext][]*Managed
	lastVec int
	closed  bool

	// Running CQs on the devices' receive goroutines (PoolConfig.Devices):
	// inline counts the receive batches in progress, runMu is held by each
	// batch's end while it runs CQs (Close waits for them), removes
	// unregister the hooks.
	inline  atomic.Int32
	runMu   sync.RWMutex
	removes []func()
	ended   bool // set by Close under runMu: late receive batches run nothing
}

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
	if cfg.Legacy {
		p.legacy = newLegacy(cfg.OnOrphan, cfg.OnAsyncError, cfg.Devices, &p.inline)
		for _, d := range cfg.Devices {
			p.removes = append(p.removes, d.OnReceiveBatch(p.rxBegin, p.rxEnd))
		}
		return p
	}
	var inline *atomic.Int32
	if len(cfg.Devices) > 0 {
		inline = &p.inline
	}
	p.vectors = make([]*runQueue, cfg.Vectors)
	for i := range p.vectors {
		p.vectors[i] = newRunQueue(1, inline)
	}
	p.wq = newRunQueue(cfg.Workers, inline)
	for _, d := range cfg.Devices {
		p.removes = append(p.removes, d.OnReceiveBatch(p.rxBegin, p.rxEnd))
	}
	return p
}

func (p *Pool) rxBegin() { p.inline.Add(1) }

// rxEnd runs, on a device's receive goroutine, the CQs fired while its
// batch was in progress (see PoolConfig.Devices).
func (p *Pool) rxEnd() {
	p.inline.Add(-1)
	if !p.runMu.TryRLock() {
		return // closing
	}
	defer p.runMu.RUnlock()
	if p.ended {
		return // a batch that began before Close removed the hooks
	}
	if p.legacy != nil {
		p.legacy.rxEnd()
		return
	}
	beginBatch(p.cfg.Devices)
	budget := RxBudget
	for _, rq := range p.vectors {
		rq.runQueued(&budget)
	}
	p.wq.runQueued(&budget)
	endBatch(p.cfg.Devices)
}

// Vectors returns the number of completion vectors.
func (p *Pool) Vectors() int { return p.cfg.Vectors }

// Legacy reports whether the pool runs the legacy design.
func (p *Pool) Legacy() bool { return p.cfg.Legacy }

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
	if p.legacy != nil {
		return p.legacy.get(p, nCQE)
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
	if l.leg != nil {
		p.legacy.put(l)
		return
	}
	l.m.used -= l.n
}

// CQs returns the pooled CQs (nil in legacy mode).
func (p *Pool) CQs() []*Managed {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*Managed
	for _, pc := range []PollContext{PollSoftIRQ, PollWorkqueue} {
		out = append(out, p.cqs[pc]...)
	}
	return out
}

// PoolStats sums the counters of a pool's CQs.
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
	if p.legacy != nil {
		return p.legacy.stats()
	}
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
	defer p.runMu.Unlock()
	if p.legacy != nil {
		p.legacy.close()
		return nil
	}
	for _, v := range p.vectors {
		v.close()
	}
	p.wq.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range p.cqs {
		for _, m := range list {
			m.cq.Close()
		}
	}
	return nil
}
