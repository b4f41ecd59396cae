package shm

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"time"

	"github.com/goroce/goroce/rocev2"
)

// Receive blocks until packets arrive, from a ring or the fallback, and
// fills pkts. The Bufs of ring packets are the backend's copies, valid
// until the next call (the fallback's are the fallback's, with the same
// lifetime). After Close it returns an error wrapping
// rocev2.ErrBackendClosed.
func (b *Backend) Receive(pkts []rocev2.Datagram) (int, error) {
	for {
		n, err := b.TryReceive(pkts)
		if n > 0 || err != nil || len(pkts) == 0 {
			return n, err
		}
		if err := b.WaitReadable(); err != nil {
			return 0, err
		}
	}
}

// TryReceive is Receive without waiting: it takes what the rings hold,
// round-robin from one call to the next so that no peer starves the
// others, then what the fallback has, and returns 0 when nothing waits.
// Each packet out of a ring is copied (the peer may scribble on the ring
// at any time: nothing points into it once TryReceive returns) and its
// ICRC verified for IPv4 ID 0: every bit of it, as the sender sealed it.
// On the way it empties the doorbells that rang, and sends what waits in a
// peer's queue into the room its consumer made.
func (b *Backend) TryReceive(pkts []rocev2.Datagram) (int, error) {
	if b.closed.Load() {
		return 0, errClosed
	}
	limit := min(len(pkts), b.batch)
	if limit == 0 {
		return 0, nil
	}
	b.rxMu.Lock()
	b.drainBells()
	for _, pr := range b.slots {
		if pr != nil && pr.peer.backlogged.Load() {
			b.flushFor(pr)
		}
	}
	n := 0
	if ns := len(b.slots); ns > 0 {
		start := b.rx.next
		b.rx.next = (start + 1) % ns
		for k := 0; k < ns && n < limit; k++ {
			if pr := b.slots[(start+k)%ns]; pr != nil && !pr.broken {
				n = b.take(pr, pkts, n, limit)
			}
		}
	}
	b.rxMu.Unlock()
	if n < limit && b.fb.ready.Load() {
		m, err := b.fbPoll.TryReceive(pkts[n:limit])
		if err != nil {
			if n > 0 {
				return n, nil
			}
			if b.closed.Load() || errors.Is(err, rocev2.ErrBackendClosed) {
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
// n. rxMu is held.
func (b *Backend) take(pr *pairing, pkts []rocev2.Datagram, n, limit int) int {
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
		*d = rocev2.Datagram{Buf: buf, Addr: pr.from, TTL: ttl, TOS: tos, ICRC: rocev2.ICRCOK}
		if !pr.rflow.VerifyICRC(buf) {
			d.ICRC = rocev2.ICRCBad
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
		pr.bell.ring() // its producer waits for the room we made
	}
	return n
}

// flushFor sends what waits in pr's peer's queue into the room its
// consumer made. rxMu is held.
func (b *Backend) flushFor(pr *pairing) {
	p := pr.peer
	p.txMu.Lock()
	wake := p.pair == pr && p.q.n > 0 && b.flush(p, pr)
	p.txMu.Unlock()
	if wake {
		pr.bell.ring()
	}
}

// drainBells empties the counters of the doorbells epoll reported, so that
// the next WaitReadable sleeps until one rings again. rxMu is held.
func (b *Backend) drainBells() {
	for i := range b.wait.rung {
		w := &b.wait.rung[i]
		if w.Load() == 0 {
			continue
		}
		for set := w.Swap(0); set != 0; set &= set - 1 {
			if slot := i*64 + bits.TrailingZeros64(set); slot < len(b.slots) && b.slots[slot] != nil {
				drainNoWait(b.slots[slot].mine, &b.rx.bell)
			}
		}
	}
	if b.wait.fbRung.Load() && b.wait.fbRung.Swap(false) {
		drainNoWait(b.fb.bell, &b.rx.bell)
	}
}

// WaitReadable blocks until a ring or the fallback may have packets, or a
// peer's consumer made room for what waits in its queue. It reads no
// packet (whoever receives next takes them). While packets come close
// together it first looks again for up to Config.Spin. Before it sleeps it
// flags every ring's consumer as sleeping and looks once more (the Dekker
// handshake of ring.go), so that no wake-up is lost.
func (b *Backend) WaitReadable() error {
	if b.closed.Load() {
		return errClosed
	}
	start := time.Now()
	busy := b.cfg.Spin > 0 && b.rx.lastWait < b.cfg.Spin // the last packet came soon: the next may too
	if busy && b.spin(start) {
		b.rx.lastWait = time.Since(start)
		return nil
	}
	if !b.prepareSleep() {
		b.rx.lastWait = time.Since(start)
		return nil
	}
	err := b.wait.sleep()
	b.rx.lastWait = time.Since(start)
	b.rxMu.Lock()
	b.wakeLocked()
	b.rxMu.Unlock()
	if b.closed.Load() {
		return errClosed
	}
	if err != nil {
		return fmt.Errorf("shm: wait: %w", err)
	}
	return nil
}

// spin looks for something to receive until Config.Spin after start,
// yielding the processor between looks; it reports whether it found
// something.
func (b *Backend) spin(start time.Time) bool {
	deadline := start.Add(b.cfg.Spin)
	for !b.closed.Load() {
		b.rxMu.Lock()
		found := b.waitingLocked()
		b.rxMu.Unlock()
		if found {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return false
}

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
	if b.fb.ready.Load() || b.wait.fbRung.Load() {
		return true
	}
	for i := range b.wait.rung {
		if b.wait.rung[i].Load() != 0 {
			return true
		}
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

func (b *Backend) wakeLocked() {
	for _, pr := range b.slots {
		if pr != nil && !pr.broken {
			pr.in.wake()
		}
	}
}
