package cq

import "sync"

// runQueue is a FIFO of scheduled CQs served by a fixed set of goroutines:
// one per completion vector for PollSoftIRQ (irq_poll's per-CPU list), a
// bounded pool for PollWorkqueue. A CQ whose run used its whole budget goes
// back to the tail, so a flooded CQ cannot starve the others.
type runQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      []*Managed
	head   int
	closed bool
	wg     sync.WaitGroup
}

func newRunQueue(workers int) *runQueue {
	r := &runQueue{}
	r.cond = sync.NewCond(&r.mu)
	r.wg.Add(workers)
	for i := 0; i < workers; i++ {
		go r.work()
	}
	return r
}

// enqueue appends m. The caller has set m.queued.
func (r *runQueue) enqueue(m *Managed) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if r.head > 0 && r.head == len(r.q) {
		r.q, r.head = r.q[:0], 0 // reuse the backing array once drained
	}
	r.q = append(r.q, m)
	r.mu.Unlock()
	r.cond.Signal()
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
		if m.run() {
			r.enqueue(m)
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
