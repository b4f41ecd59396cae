package shm

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/goroce/goroce/rocev2/backend"
)

// Receive blocks until packets arrive, from a ring or the fallback, and
// fills pkts. The Bufs of ring packets are the backend's copies, valid
// until the next call (the fallback's are the fallback's, with the same
// lifetime). After Close it returns an error wrapping
// backend.ErrBackendClosed.
func (b *Backend) Receive(pkts []backend.Incoming) (int, error) {
	r := &b.rx.recv
	r.pkts, r.n, r.err = pkts, 0, nil
	err := b.serve(r.drain, r.done)
	n, rerr := r.n, r.err
	r.pkts = nil
	if n > 0 || rerr != nil || len(pkts) == 0 {
		return n, rerr
	}
	return 0, err
}

// blockingReceive is Receive's state, with its callbacks bound once so
// that a Receive allocates nothing.
type blockingReceive struct {
	pkts        []backend.Incoming
	n           int
	err         error
	drain, done func() bool
}

func (r *blockingReceive) init(b *Backend) {
	r.drain = func() bool {
		r.n, r.err = b.TryReceive(r.pkts)
		return false
	}
	r.done = func() bool { return r.n > 0 || r.err != nil || len(r.pkts) == 0 }
}

// Serve is the receive loop of backend.Poller: it calls drain while it
// reports more, and between calls sleeps until a doorbell rings (a ring
// received, a consumer made room for what waits in a peer's queue, the
// fallback became readable), until Close. Before it sleeps it flags every
// ring's consumer as sleeping and looks once more (the Dekker handshake of
// ring.go), so that no wake-up is lost; while awake, producers ring no
// doorbell at all. While packets come close together it first looks again
// for up to Config.Spin.
func (b *Backend) Serve(drain func() bool) error {
	return b.serve(drain, nil)
}

// ServeUntil is backend.Lendable's: Serve until done reports true or
// Interrupt is called.
func (b *Backend) ServeUntil(drain, done func() bool) error {
	return b.serve(drain, done)
}

// Interrupt is backend.Lendable's: it ends the runtime poller's read of
// the epoll set that serve sleeps in (backend.InterruptRead); a serve not
// yet asleep returns at its first sleep.
func (b *Backend) Interrupt() { backend.InterruptRead(b.wait.file) }

// serve runs drain inside the runtime poller's read of the waiter's epoll
// set until done (nil: never) reports true or the backend closes. The
// doorbells are never read: each write to one wakes the set's waiter
// through the netpoller, edge-triggered, whatever its counter holds.
func (b *Backend) serve(drain, done func() bool) error {
	if b.closed.Load() {
		return errClosed
	}
	b.rx.drain, b.rx.done = drain, done
	err := b.wait.rc.Read(b.rx.readFn)
	b.rx.drain, b.rx.done = nil, nil
	if b.closed.Load() {
		return errClosed
	}
	if backend.Interrupted(b.wait.file, err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("shm: wait: %w", err)
	}
	return nil
}

// TryReceive is Receive without waiting: it takes what the rings hold,
// round-robin from one call to the next so that no peer starves the
// others, then what the fallback has, and returns 0 when nothing waits.
// Each packet out of a ring is copied (the peer may scribble on the ring
// at any time: nothing points into it once TryReceive returns) and its
// ICRC verified for IPv4 ID 0: every bit of it, as the sender sealed it.
// On the way it empties the doorbells that rang, and sends what waits in a
// peer's queue into the room its consumer made.
func (b *Backend) TryReceive(pkts []backend.Incoming) (int, error) {
	if b.closed.Load() {
		return 0, errClosed
	}
	limit := min(len(pkts), b.batch)
	if limit == 0 {
		return 0, nil
	}
	var bells bellList // rung after rxMu: no system call under it
	b.rxMu.Lock()
	for _, pr := range b.slots {
		if pr != nil && pr.peer.backlogged.Load() {
			b.flushFor(pr, &bells)
		}
	}
	n := 0
	if ns := len(b.slots); ns > 0 {
		start := b.rx.next
		b.rx.next = (start + 1) % ns
		for k := 0; k < ns && n < limit; k++ {
			if pr := b.slots[(start+k)%ns]; pr != nil && !pr.broken {
				n = b.take(pr, pkts, n, limit, &bells)
			}
		}
	}
	b.rxMu.Unlock()
	bells.ring(b)
	if n < limit && b.fb.ready.Load() {
		m, err := b.fbPoll.TryReceive(pkts[n:limit])
		if err != nil {
			if n > 0 {
				return n, nil
			}
			if b.closed.Load() || errors.Is(err, backend.ErrBackendClosed) {
				return 0, errClosed
			}
			return 0, fmt.Errorf("shm: fallback: %w", err)
		}
		if m == 0 {
			b.fb.ready.Store(false)
			select {
			case b.fb.drained <- struct{}{}:
			default:
			}
		}
		n += m
	}
	return n, nil
}

// take copies what pr's ring holds into pkts[n:limit] and returns the new
// n; a producer to wake goes on bells. rxMu is held.
func (b *Backend) take(pr *pairing, pkts []backend.Incoming, n, limit int, bells *bellList) int {
	more, err := pr.in.poll()
	if err != nil {
		b.corruptIn(pr)
		return n
	}
	if !more {
		return n
	}
	first, bytes, bad := n, 0, 0
	for n < limit {
		pkt, ttl, tos, err := pr.in.next()
		if err != nil {
			b.corruptIn(pr)
			break
		}
		if pkt == nil {
			break
		}
		off := n * maxPacket
		buf := b.rx.slab[off : off+len(pkt) : off+maxPacket]
		copy(buf, pkt)
		d := &pkts[n]
		*d = backend.Incoming{Buf: buf, Src: pr.from, TTL: ttl, TOS: tos, ICRC: backend.ICRCOK}
		if !pr.rflow.VerifyICRC(buf) {
			d.ICRC = backend.ICRCBad
			bad++
		}
		bytes += len(buf)
		n++
	}
	b.stats.receivedPackets.Add(uint64(n - first))
	b.stats.receivedBytes.Add(uint64(bytes))
	if bad > 0 {
		b.stats.badICRC.Add(uint64(bad))
	}
	if !pr.broken && pr.in.release() {
		bells.add(b, pr) // its producer waits for the room we made
	}
	return n
}

// flushFor sends what waits in pr's peer's queue into the room its
// consumer made; a consumer to wake goes on bells. rxMu is held.
func (b *Backend) flushFor(pr *pairing, bells *bellList) {
	p := pr.peer
	p.txMu.Lock()
	wake := p.pair == pr && p.q.n > 0 && b.flush(p, pr)
	p.txMu.Unlock()
	if wake {
		bells.add(b, pr)
	}
}

// bellList is the doorbells one TryReceive owes, rung once rxMu is
// released (a doorbell is a system call, and rxMu is what every receiver
// waits for). A pairing torn down meanwhile has no doorbell left to ring.
type bellList struct {
	p [4]*pairing
	n int
}

// add owes pr's doorbell; past the list's room it rings at once (rare:
// that many producers waiting for room in one call).
func (l *bellList) add(b *Backend, pr *pairing) {
	if l.n == len(l.p) {
		b.ring(pr)
		return
	}
	l.p[l.n] = pr
	l.n++
}

// ring rings what is owed.
func (l *bellList) ring(b *Backend) {
	for _, pr := range l.p[:l.n] {
		b.ring(pr)
	}
}

// serveRead is serve's callback inside the runtime poller's read, bound
// once (rx.readFn): it drains, and parks (false) once nothing waits.
func (b *Backend) serveRead(uintptr) bool {
	b.wakeAll()
	for {
		for b.rx.drain() && !b.closed.Load() {
		}
		if b.closed.Load() || (b.rx.done != nil && b.rx.done()) {
			return true
		}
		if b.spin() {
			continue
		}
		if b.prepareSleep() {
			b.rx.slept = time.Now()
			return false // park: a doorbell calls again
		}
	}
}

// spin looks for something to receive for up to Config.Spin, yielding
// the processor between looks, when the last sleep was shorter than that
// (packets come close together: the next may too); it reports whether it
// found something.
func (b *Backend) spin() bool {
	if b.cfg.Spin <= 0 || b.rx.slept.IsZero() || b.rx.woke.Sub(b.rx.slept) >= b.cfg.Spin {
		return false
	}
	deadline := time.Now().Add(b.cfg.Spin)
	for !b.closed.Load() {
		b.rxMu.Lock()
		found := b.waitingLocked()
		b.rxMu.Unlock()
		if found {
			return true
		}
		if time.Now().After(deadline) {
			b.rx.slept = time.Time{} // it did not pay: sleep next time
			return false
		}
		runtime.Gosched()
	}
	return false
}

// BeginBusyPoll is backend.BusyPoller's: the rings' consumers are awake,
// their producers ring no doorbell.
func (b *Backend) BeginBusyPoll() {
	b.rxMu.Lock()
	b.wakeLocked()
	b.rxMu.Unlock()
}

// EndBusyPoll is backend.BusyPoller's: the consumers sleep again, with the
// same handshake as before the receive goroutine sleeps; if something
// arrived, they stay awake and it reports so, for the caller to take it.
func (b *Backend) EndBusyPoll() bool { return !b.prepareSleep() }

// prepareSleep reports whether nothing waits, having flagged the rings'
// consumers as sleeping if so.
func (b *Backend) prepareSleep() bool {
	b.rxMu.Lock()
	defer b.rxMu.Unlock()
	if b.waitingLocked() {
		return false
	}
	for _, pr := range b.slots {
		if pr != nil && !pr.broken {
			pr.in.sleep()
		}
	}
	if b.waitingLocked() {
		b.wakeLocked()
		return false
	}
	return true
}

// waitingLocked reports whether there is something for TryReceive to do.
func (b *Backend) waitingLocked() bool {
	if b.fb.ready.Load() {
		return true
	}
	for _, pr := range b.slots {
		if pr == nil || pr.broken {
			continue
		}
		if more, err := pr.in.poll(); more || err != nil {
			return true
		}
	}
	return false
}

// wakeAll clears every ring's sleeping flag, with the time of the wake
// (for spin): the receive goroutine is awake, and producers need ring no
// doorbell until it sleeps again.
func (b *Backend) wakeAll() {
	b.rx.woke = time.Now()
	b.rxMu.Lock()
	b.wakeLocked()
	b.rxMu.Unlock()
}

func (b *Backend) wakeLocked() {
	for _, pr := range b.slots {
		if pr != nil && !pr.broken {
			pr.in.wake()
		}
	}
}
