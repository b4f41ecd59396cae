package device

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/rocev2/backend"
)

// Lending the receive loop (backend.Lendable). A goroutine that waits for
// data (an SMC-R Read) would otherwise sleep until the receive goroutine
// has been woken by the packet and has woken it: two wake-ups per message
// on each side, and at one connection the wake-ups are most of the cost.
// Instead, when nobody else serves the backend, the waiting goroutine
// serves it itself until its own data is there (WaitOn): the packet wakes
// it, it runs the receive batch and the completions it fires, finds its
// data and returns to the caller. One wake-up.
//
// Who serves the backend, under mu:
//
//	servedByRecv    the receive goroutine (as without lending)
//	servedByLender  a goroutine in WaitOn
//	servedByNobody  pending: the receive goroutine waits on resume
//
// The device is pending once a lender has its data and no other goroutine
// waits on the device; the lender's next WaitOn (a request/response
// program reads again within microseconds) serves again without a
// wake-up. Anything else resumes the receive goroutine: a goroutine that
// begins to wait for the device some other way (BeginWait: a Write that
// waits for room, a second reader), Close, or the backstop, HoldLimit
// after the device became pending, so that packets for no waiter (an LLC
// request, an ACK) wait that long at most.
//
// The receive goroutine hands the backend to a reader the same way: a
// reader that finds it serving records itself (want) and waits as usual;
// once the receive goroutine has delivered that reader's data and no
// other goroutine waits, it steps aside (pending) for the reader's next
// WaitOn.
//
// Lock order: mu is never held while serving, nor while calling a
// Waiter's ready (which takes its owner's locks); ready is called by the
// server outside rxMu, between receive batches.
type lendState struct {
	srv   backend.Lendable // nil: the backend cannot be lent
	drain func() bool      // d.drain(srv), with inDrain set around it

	mu     sync.Mutex
	server serverKind
	closed bool // Close has begun: nobody lends any more
	// waiters: goroutines between BeginWait (or a WaitOn that did not
	// serve) and EndWait, want aside. Changed under mu; stepAside reads
	// it without.
	waiters atomic.Int32

	want    atomic.Pointer[Waiter] // a reader waiting while the receive goroutine serves
	inDrain atomic.Bool            // the server is in a receive batch: it looks at ready after it
	stepped bool                   // the receive goroutine's stepAside said yes (its own)
	resume  chan struct{}          // cap 1: the receive goroutine serves again
	quit    chan struct{}          // closed by Close
	stepFn  func() bool            // stepAside, bound once
	timer   Timer                  // the backstop
}

type serverKind uint8

const (
	servedByRecv serverKind = iota
	servedByLender
	servedByNobody
)

// A Waiter is a goroutine's wait for data on a device, which it may serve
// meanwhile (WaitOn). ready reports whether the wait is over; it must not
// need the receive path's locks or the device's, and is called between
// receive batches.
type Waiter struct {
	ready   func() bool
	lending atomic.Pointer[lendState] // the device it serves in WaitOn
}

// NewWaiter returns a Waiter whose wait ends when ready reports true.
func NewWaiter(ready func() bool) *Waiter { return &Waiter{ready: ready} }

// Kick tells w that what ready reports may have changed other than by a
// packet the device received (a close, a deadline): a WaitOn asleep in the
// backend wakes up to look. It is cheap when w is not serving, or is in a
// receive batch (which looks at ready when it ends): then it does nothing.
func (w *Waiter) Kick() {
	if l := w.lending.Load(); l != nil && !l.inDrain.Load() {
		l.srv.Interrupt()
	}
}

func (l *lendState) init(d *Device) {
	srv, ok := d.backend.(backend.Lendable)
	if !ok {
		return
	}
	l.srv = srv
	l.drain = func() bool {
		l.inDrain.Store(true)
		more := d.drain(srv)
		l.inDrain.Store(false)
		return more
	}
	l.resume = make(chan struct{}, 1)
	l.quit = make(chan struct{})
	l.stepFn = l.stepAside
	l.timer.Init(func() { l.onBackstop(d) })
}

// WaitOn serves the device's receive loop on the calling goroutine until
// w.ready reports true, when nobody else serves it, and reports true: the
// caller looks again at what it waits for. Otherwise it reports false at
// once and the caller waits as it would without it, then calls EndWait(w).
func (d *Device) WaitOn(w *Waiter) bool {
	l := &d.lend
	if l.srv == nil {
		return false
	}
	l.mu.Lock()
	if l.closed || l.server != servedByNobody {
		if l.server == servedByRecv && !l.closed && l.want.Load() == nil {
			l.want.Store(w) // the receive goroutine steps aside once w is ready
		} else {
			l.addWaiterLocked(1)
		}
		l.mu.Unlock()
		return false
	}
	l.server = servedByLender
	d.timers.Stop(&l.timer)
	l.mu.Unlock()

	d.Counters.LentWaits.Add(1)
	w.lending.Store(l)
	err := l.srv.ServeUntil(l.drain, w.ready)
	w.lending.Store(nil)

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		if !errors.Is(err, backend.ErrBackendClosed) {
			d.Counters.LinkDowned.Add(1)
		}
		l.resumeLocked() // the receive goroutine sees the error for itself
	case l.waiters.Load() > 0 || l.closed:
		l.resumeLocked()
	default:
		l.server = servedByNobody
		d.timers.Reset(&l.timer, d.out.limit)
	}
	return true
}

// BeginWait tells the device that the caller is about to wait for
// something its receive path brings (room in a peer's buffer, a send
// slot): the receive goroutine serves until the matching EndWait(nil).
func (d *Device) BeginWait() {
	l := &d.lend
	if l.srv == nil {
		return
	}
	l.mu.Lock()
	l.addWaiterLocked(1)
	l.mu.Unlock()
}

// EndWait ends a wait begun by BeginWait (w nil) or by a WaitOn(w) that
// reported false.
func (d *Device) EndWait(w *Waiter) {
	l := &d.lend
	if l.srv == nil {
		return
	}
	l.mu.Lock()
	if w != nil && l.want.Load() == w {
		l.want.Store(nil)
	} else {
		l.addWaiterLocked(-1)
	}
	l.mu.Unlock()
}

// addWaiterLocked counts waiters; the first one resumes a pending device.
func (l *lendState) addWaiterLocked(n int) {
	if l.waiters.Add(int32(n)) > 0 && l.server == servedByNobody {
		l.resumeLocked()
	}
}

// resumeLocked hands the backend back to the receive goroutine.
func (l *lendState) resumeLocked() {
	l.server = servedByRecv
	select {
	case l.resume <- struct{}{}:
	default:
	}
}

// stepAside is the receive goroutine's done: it gives the backend up once
// the reader that wants it has its data and nobody else waits.
func (l *lendState) stepAside() bool {
	w := l.want.Load()
	l.stepped = w != nil && l.waiters.Load() == 0 && w.ready()
	return l.stepped
}

// serveLent is the receive goroutine's loop on a Lendable backend.
func (d *Device) serveLent() {
	l := &d.lend
	for {
		l.stepped = false
		err := l.srv.ServeUntil(l.drain, l.stepFn)
		if err != nil {
			if errors.Is(err, backend.ErrBackendClosed) {
				return
			}
			d.Counters.LinkDowned.Add(1)
			continue
		}
		if !l.stepped {
			continue // an interrupt meant for a lender that has left
		}
		l.mu.Lock()
		if l.waiters.Load() > 0 || l.closed {
			l.mu.Unlock()
			continue
		}
		l.server = servedByNobody // the reader's next WaitOn serves
		d.timers.Reset(&l.timer, d.out.limit)
		l.mu.Unlock()
		select {
		case <-l.resume:
		case <-l.quit:
			return
		}
	}
}

// onBackstop runs on the timer goroutine: a pending device's receive
// goroutine serves again.
func (l *lendState) onBackstop(d *Device) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.server == servedByNobody && !l.closed {
		d.Counters.LentWaitBackstops.Add(1)
		l.resumeLocked()
	}
}

// stop ends lending for Close: a pending receive goroutine returns (the
// backend is closed: it would find nothing more).
func (l *lendState) stop() {
	if l.srv == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.quit)
	}
}
