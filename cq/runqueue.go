package cq

import (
	"sync"
	"sync/atomic"
)

// runQueue is a FIFO of scheduled CQs served by a fixed set of goroutines:
// one per completion vector for PollSoftIRQ (irq_poll's per-CPU list), a
// bounded pool for PollWorkqueue. A CQ whose run used its whole budget goes
// back to the tail, so a flooded CQ cannot starve the others.
type runQueue struct {
	// rxBatches, if set, counts the receive batches in progress on the
	// pool's devices: while one is, a fired CQ waits for the batch's end
	// to run it (runQueued) instead of waking the goroutine.
	rxBatches *atomic.Int32
	mu        sync.Mutex
	cond      *sync.Cond
	q         []*Managed
	head      int
	closed    bool
	wg        sync.WaitGroup
}

func newRunQueue(workers int, rxBatches *atomic.Int32) *runQueue {
	r := &runQueue{rxBatches: rxBatches}
	r.cond = sync.NewCond(&r.mu)
	r.wg.Add(workers)
	for i := 0; i < workers; i++ {
		go r.work()
	}
	return r
}

// enqueue appends m and wakes a goroutine for it, unless mayWait and a
// receive batch is in progress, whose end will run it. The caller has set
// m.queued.
//
// The batch count is read under mu, and runQueued takes mu after its batch
// decremented the count: so if the read saw a batch in progress, the end of
// that batch (or of a later one) finds m queued.
func (r *runQueue) enqueue(m *Managed, mayWait bool) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if r.head > 0 && r.head == len(r.q) {
		r.q, r.head = r.q[:0], 0 // reuse the backing array once drained
	}
	r.q = append(r.q, m)
	wait := mayWait && r.inBatch()
	r.mu.Unlock()
	if !wait {
		r.cond.Signal()
	}
}

// inBatch reports whether a receive batch is in progress on one of the
// pool's devices.
func (r *runQueue) inBatch() bool { return r.rxBatches != nil && r.rxBatches.Load() > 0 }

// runQueued runs, on the calling goroutine, the queued CQs until the
// queue is empty or *budget completions were handled (net_rx_action's
// budget: the caller, a receive goroutine, has packets to get back to); the
// caller brackets it with the devices' batch. A CQ that used its own
// budget goes to the tail and runs again within the caller's. Whatever is
// left when the caller's budget runs out is the goroutine's: it is woken.
func (r *runQueue) runQueued(budget *int) {
	for *budget > 0 {
		m := r.tryNext()
		if m == nil {
			return
		}
		again, n := m.run(true)
		*budget -= n
		if again {
			r.requeue(m)
		}
	}
	r.mu.Lock()
	left := r.head < len(r.q)
	r.mu.Unlock()
	if left {
		r.cond.Signal()
	}
}

// requeue appends m without waking a goroutine (runQueued's loop, or the
// wake-up at its end, takes it). The caller has m.queued set.
func (r *runQueue) requeue(m *Managed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.q = append(r.q, m)
	}
}

// tryNext pops the head, or returns nil if there is none.
func (r *runQueue) tryNext() *Managed {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.head == len(r.q) || r.closed {
		return nil
	}
	m := r.q[r.head]
	r.q[r.head] = nil
	r.head++
	return m
}

func (r *runQueue) next() *Managed {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.head == len(r.q) && !r.closed {
		r.cond.Wait()
	}
	if r.closed {
		return nil
	}
	m := r.q[r.head]
	r.q[r.head] = nil
	r.head++
	return m
}

func (r *runQueue) work() {
	defer r.wg.Done()
	for {
		m := r.next()
		if m == nil {
			return
		}
		if again, _ := m.run(false); again {
			r.enqueue(m, false)
		}
	}
}

// close stops the goroutines after their current run and waits for them.
func (r *runQueue) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cond.Broadcast()
	r.wg.Wait()
}
