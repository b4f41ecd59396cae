package device

import (
	"container/heap"
	"sync"
	"time"
)

// Timers is the device's single timer source: one goroutine and one
// time.Timer serve every QP's retransmit and RNR timers, however many there
// are. A Timer is embedded in its owner (no allocation per arm), and moving
// a deadline later — what every ACK does to the retransmit timer — only
// updates a field: the entry is re-queued when its old deadline comes up.
type Timers struct {
	base    time.Time // deadlines are monotonic nanoseconds since base (0: none)
	mu      sync.Mutex
	q       timerHeap
	wake    *time.Timer
	wakeAt  int64
	done    chan struct{}
	stopped chan struct{}
}

// Timer is one resettable timer. Fn runs on the timer goroutine; it must not
// block for long.
type Timer struct {
	Fn       func()
	deadline int64 // 0 when stopped; guarded by Timers.mu
	queuedAt int64 // the heap key while queued
	index    int   // heap index, -1 when not queued
}

// NewTimers starts the timer goroutine. Stop ends it.
func NewTimers() *Timers {
	t := &Timers{
		base:    time.Now(),
		wake:    time.NewTimer(time.Hour),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	t.wake.Stop()
	go t.run()
	return t
}

// Init prepares a Timer that calls fn when it fires.
func (tm *Timer) Init(fn func()) { tm.Fn, tm.index = fn, -1 }

// now returns the monotonic time since t.base: one clock read (time.Now
// reads two, and every post and ACK re-arms a timer).
func (t *Timers) now() int64 { return max(int64(time.Since(t.base)), 1) }

// Reset arms tm to fire after d (replacing any earlier deadline).
func (t *Timers) Reset(tm *Timer, d time.Duration) {
	now := t.now()
	when := now + int64(max(d, 0))
	t.mu.Lock()
	tm.deadline = when
	switch {
	case tm.index < 0:
		tm.queuedAt = when
		heap.Push(&t.q, tm)
	case when < tm.queuedAt:
		tm.queuedAt = when
		heap.Fix(&t.q, tm.index)
	default:
		// Later than queued: leave it; it is re-queued when it comes up.
	}
	if t.wakeAt == 0 || t.q[0].queuedAt < t.wakeAt {
		// Move the goroutine's wake-up earlier from here rather than kick
		// it to do so: a post that arms its QP's first timer (or
		// the backstop) then costs no goroutine hand-off.
		t.wakeAt = t.q[0].queuedAt
		// now is from before the lock: one clock read per Reset, and a
		// wake-up late by the lock's wait at most.
		t.wake.Reset(time.Duration(t.wakeAt - now))
	}
	t.mu.Unlock()
}

// Stop disarms tm. A Fn already running is not waited for. Like a later
// deadline, it only updates a field: the entry leaves the queue when its
// old deadline comes up, unless a Reset has re-armed it by then. An RC
// requester stops and re-arms its retransmit timer on every ACK and post.
func (t *Timers) Stop(tm *Timer) {
	t.mu.Lock()
	tm.deadline = 0
	t.mu.Unlock()
}

// Armed reports whether tm has a deadline.
func (t *Timers) Armed(tm *Timer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return tm.deadline != 0
}

// Close stops the goroutine and waits for it.
func (t *Timers) Close() {
	select {
	case <-t.done:
	default:
		close(t.done)
	}
	<-t.stopped
}

func (t *Timers) run() {
	defer close(t.stopped)
	var due []*Timer
	for {
		select {
		case <-t.done:
			t.wake.Stop()
			return
		case <-t.wake.C:
		}
		due = due[:0]
		now := t.now()
		t.mu.Lock()
		for len(t.q) > 0 && t.q[0].queuedAt <= now {
			tm := t.q[0]
			if tm.deadline == 0 { // stopped
				heap.Pop(&t.q)
				continue
			}
			if tm.deadline > now { // moved later: re-queue at the real deadline
				tm.queuedAt = tm.deadline
				heap.Fix(&t.q, 0)
				continue
			}
			heap.Pop(&t.q)
			tm.deadline = 0
			due = append(due, tm)
		}
		t.wakeAt = 0
		if len(t.q) > 0 {
			t.wakeAt = t.q[0].queuedAt
			t.wake.Reset(time.Duration(t.wakeAt - now))
		}
		t.mu.Unlock()
		for _, tm := range due {
			tm.Fn()
		}
	}
}

type timerHeap []*Timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].queuedAt < h[j].queuedAt }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	tm := x.(*Timer)
	tm.index = len(*h)
	*h = append(*h, tm)
}
func (h *timerHeap) Pop() any {
	old := *h
	tm := old[len(old)-1]
	old[len(old)-1] = nil
	tm.index = -1
	*h = old[:len(old)-1]
	return tm
}
