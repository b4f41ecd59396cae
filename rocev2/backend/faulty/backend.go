package faulty

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

var errClosed = fmt.Errorf("faulty: %w", backend.ErrBackendClosed)

// bthMasked is the BTH byte the ICRC does not cover (FECN, BECN, resv6).
const bthMasked = 4

// Backend is a backend.Backend that injects faults into another.
type Backend struct {
	inner  backend.Backend
	cfg    Config
	closed atomic.Bool

	mu       sync.Mutex // protects tx, the holds, the pool and the out batch
	tx       *rand.Rand
	reorderQ []held
	delayQ   []held // FIFO: every packet waits the same Delay
	pool     [][]byte
	out      []backend.Outgoing // the batch being handed to inner
	outMeta  []outMeta

	rx *rand.Rand // used by one receiver at a time (Receive, or TryReceive under the device's receive lock)

	// The delay goroutine: wake tells it the delay queue gained a head,
	// stop ends it, done closes when it has ended. nil without Delay.
	wake, stop, done chan struct{}

	stats struct {
		sent, forwarded, lost, duplicated, reordered, delayed atomic.Uint64
		holdFull, mangled, corrupted, sendErrors              atomic.Uint64
	}
}

// held is a packet held back; its Buf belongs to the wrapper.
type held struct {
	d     backend.Outgoing
	after int       // reorder: forwarded packets still to wait for
	at    time.Time // delay: when to send; reorder: when to send at the latest
}

// outMeta says where an entry of the out batch came from.
type outMeta struct {
	origin int  // index in the caller's batch, or -1 for a copy
	owned  bool // Buf comes from the pool
}

var _ backend.Backend = (*Backend)(nil)

// Wrap returns a backend that sends and receives through inner, with the
// faults of cfg. Closing it closes inner.
func Wrap(inner backend.Backend, cfg Config) *Backend {
	if cfg.MaxHold <= 0 {
		cfg.MaxHold = DefaultMaxHold
	}
	b := &Backend{
		inner: inner,
		cfg:   cfg,
		tx:    rand.New(rand.NewPCG(cfg.Seed, txStream)),
		rx:    rand.New(rand.NewPCG(cfg.Seed, rxStream)),
	}
	if (cfg.Delay > 0 && cfg.DelayRate > 0) || cfg.Reorder > 0 {
		b.wake = make(chan struct{}, 1)
		b.stop = make(chan struct{})
		b.done = make(chan struct{})
		go b.delayLoop()
	}
	return b
}

// Stats returns the fault counters.
func (b *Backend) Stats() Stats {
	s := &b.stats
	return Stats{
		Sent: s.sent.Load(), Forwarded: s.forwarded.Load(), Lost: s.lost.Load(),
		Duplicated: s.duplicated.Load(), Reordered: s.reordered.Load(), Delayed: s.delayed.Load(),
		HoldFull: s.holdFull.Load(), Mangled: s.mangled.Load(), Corrupted: s.corrupted.Load(),
		SendErrors: s.sendErrors.Load(),
	}
}

// Send applies the send-side faults to pkts and hands what is left, with
// the reordered packets whose turn has come, to the inner backend in one
// call. Packets that go out on time are passed as they are, so the inner
// backend seals them in the caller's buffers and sets their Wire; held,
// duplicated and mangled packets travel in the wrapper's own copies, and
// the caller's packets that did not leave as they are (held, mangled or
// lost) come back marked Wire.Unsealed.
func (b *Backend) Send(pkts []backend.Outgoing) error {
	if b.closed.Load() {
		return errClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range pkts {
		pkts[i].Wire = backend.Wire{Unsealed: true} // until the inner backend seals it
		b.stats.sent.Add(1)
		f := decide(b.tx, &b.cfg)
		if f.lose {
			b.stats.lost.Add(1)
			continue
		}
		d := pkts[i]
		owned := false
		if f.mangle && len(d.Buf) > 0 {
			d.Buf = b.copyBuf(d.Buf)
			owned = true
			n := uint64(min(len(d.Buf), rocev2.BTHLen))
			bit := f.mangleBit % (8 * n)
			d.Buf[bit/8] ^= 1 << (bit % 8)
			b.stats.mangled.Add(1)
		}
		copies := 1
		if f.duplicate {
			copies = 2
			b.stats.duplicated.Add(1)
		}
		for c := range copies {
			e, own, origin := d, owned, i
			if c == 1 {
				// A buffer of its own: the inner backend seals each packet
				// in place, maybe for different IPv4 IDs.
				e.Buf, own = b.copyBuf(d.Buf), true
			}
			if own {
				origin = -1
			}
			b.route(e, own, origin, &f)
		}
	}
	return b.sendOut(pkts)
}

// route holds a packet or adds it to the out batch.
func (b *Backend) route(d backend.Outgoing, owned bool, origin int, f *faults) {
	room := len(b.reorderQ)+len(b.delayQ) < b.cfg.MaxHold
	if (f.delay || f.reorder) && !room {
		b.stats.holdFull.Add(1)
	}
	switch {
	case f.delay && room:
		if !owned {
			d.Buf = b.copyBuf(d.Buf)
		}
		b.delayQ = append(b.delayQ, held{d: d, at: time.Now().Add(b.cfg.Delay)})
		b.stats.delayed.Add(1)
		if len(b.delayQ) == 1 {
			select {
			case b.wake <- struct{}{}:
			default:
			}
		}
	case f.reorder && room:
		if !owned {
			d.Buf = b.copyBuf(d.Buf)
		}
		// A real network reorders within a bounded time: if no later
		// packet overtakes this one within MaxReorderWait, it goes anyway.
		b.reorderQ = append(b.reorderQ, held{d: d, after: f.after, at: time.Now().Add(b.cfg.maxReorderWait())})
		b.stats.reordered.Add(1)
		if len(b.reorderQ) == 1 {
			select {
			case b.wake <- struct{}{}:
			default:
			}
		}
	default:
		b.emit(d, owned, origin)
		// One more packet went ahead of every reordered one.
		q := b.reorderQ[:0]
		for _, h := range b.reorderQ {
			if h.after--; h.after == 0 {
				b.emit(h.d, true, -1)
			} else {
				q = append(q, h)
			}
		}
		clear(b.reorderQ[len(q):])
		b.reorderQ = q
	}
}

func (b *Backend) emit(d backend.Outgoing, owned bool, origin int) {
	b.out = append(b.out, d)
	b.outMeta = append(b.outMeta, outMeta{origin: origin, owned: owned})
}

// sendOut hands the out batch to the inner backend, reports the headers the
// caller's packets left in back into pkts and recycles the copies.
func (b *Backend) sendOut(pkts []backend.Outgoing) error {
	if len(b.out) == 0 {
		return nil
	}
	err := b.inner.Send(b.out)
	b.stats.forwarded.Add(uint64(len(b.out)))
	for j, m := range b.outMeta {
		if m.origin >= 0 {
			pkts[m.origin].Wire = b.out[j].Wire
		}
		if m.owned {
			b.pool = append(b.pool, b.out[j].Buf)
		}
	}
	clear(b.out)
	b.out, b.outMeta = b.out[:0], b.outMeta[:0]
	return err
}

// copyBuf copies p into a buffer from the pool.
func (b *Backend) copyBuf(p []byte) []byte {
	var buf []byte
	if k := len(b.pool); k > 0 {
		buf, b.pool = b.pool[k-1][:0], b.pool[:k-1]
	}
	return append(buf, p...)
}

// Flush sends every held packet now: the reordered ones, then the delayed
// ones, each in the order they were held.
func (b *Backend) Flush() error {
	if b.closed.Load() {
		return errClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range [][]held{b.reorderQ, b.delayQ} {
		for _, h := range q {
			b.emit(h.d, true, -1)
		}
		clear(q)
	}
	b.reorderQ, b.delayQ = b.reorderQ[:0], b.delayQ[:0]
	err := b.sendOut(nil)
	if err != nil {
		b.stats.sendErrors.Add(1)
	}
	return err
}

// Receive receives from the inner backend and corrupts some packets (see
// the package comment).
func (b *Backend) Receive(pkts []backend.Incoming) (int, error) {
	n, err := b.inner.Receive(pkts)
	b.corrupt(pkts[:n])
	return n, err
}

// corrupt flips a bit in some of pkts. Its caller is the one receiver.
func (b *Backend) corrupt(pkts []backend.Incoming) {
	for i := range pkts {
		d := &pkts[i]
		corrupt, bit := corruption(b.rx, &b.cfg)
		if !corrupt || len(d.Buf) == 0 {
			continue
		}
		bits := uint64(8 * len(d.Buf))
		if len(d.Buf) > bthMasked {
			bits -= 8 // skip the masked byte
		}
		bit %= bits
		k := int(bit / 8)
		if len(d.Buf) > bthMasked && k >= bthMasked {
			k++
		}
		d.Buf[k] ^= 1 << (bit % 8)
		if d.ICRC.Matches() {
			d.ICRC = backend.ICRCBad
		}
		b.stats.corrupted.Add(1)
	}
}

// Backend returns the injector as a device should be given it: when the
// inner backend can receive without blocking (backend.Poller), so can the
// returned one, and a device on it keeps its busy-polling path
// (device.Poller) under faults too; otherwise it is b itself. The device
// receives under one lock, so the receive-side random stream still has one
// user at a time.
func (b *Backend) Backend() backend.Backend {
	return backend.KeepPolling(b, b.inner, b.corrupt)
}

// LocalAddr delegates.
func (b *Backend) LocalAddr() netip.AddrPort { return b.inner.LocalAddr() }

// BatchSize delegates.
func (b *Backend) BatchSize() int { return b.inner.BatchSize() }

// LinkMTU delegates.
func (b *Backend) LinkMTU() int { return b.inner.LinkMTU() }

// Close stops the delay goroutine, drops the held packets and closes the
// inner backend. Closing twice is a no-op.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := b.inner.Close() // fails a send the goroutine may be blocked in
	if b.stop != nil {
		close(b.stop)
		<-b.done
	}
	b.mu.Lock()
	clear(b.reorderQ)
	clear(b.delayQ)
	b.reorderQ, b.delayQ, b.pool = nil, nil, nil
	b.mu.Unlock()
	return err
}
