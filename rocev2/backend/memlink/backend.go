package memlink

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

var (
	errClosed = fmt.Errorf("memlink: %w", backend.ErrBackendClosed)
	errShort  = errors.New("memlink: send: datagram shorter than an ICRC")
)

// minBufCap is the smallest buffer a copy gets, so that buffers recycled
// between packets of different sizes rarely need to grow.
const minBufCap = 4096 + 128 // the largest RoCE packet at IB MTU 4096

// Backend is a backend.Backend attached to a Network.
type Backend struct {
	net    *Network
	local  netip.AddrPort
	hdrLen int // IP and UDP header bytes, for the MTU check
	closed atomic.Bool

	mu      sync.Mutex // protects everything below
	ready   sync.Cond  // signalled when the queue gains a packet or on close
	queue   []queued   // ring of cfg.QueueLen
	head, n int        // first queued packet and count
	free    [][]byte   // buffers to copy arriving packets into
	lent    [][]byte   // buffers handed out by the last Receive
	shut    bool       // closed, as seen under mu
	kicked  bool       // Interrupt was called: a ServeUntil returns
}

type queued struct {
	buf []byte
	src netip.AddrPort
}

var _ backend.Backend = (*Backend)(nil)

func newBackend(n *Network, local netip.AddrPort) *Backend {
	b := &Backend{net: n, local: local, queue: make([]queued, n.cfg.QueueLen)}
	b.ready.L = &b.mu
	b.hdrLen = rocev2.IPv4HeaderLen + rocev2.UDPHeaderLen
	if local.Addr().Is6() {
		b.hdrLen = rocev2.IPv6HeaderLen + rocev2.UDPHeaderLen
	}
	return b
}

// Send seals and delivers each packet in order; see the package comment for
// what is dropped. It fails only for a datagram too short to hold an ICRC
// (the others still go) or after Close.
func (b *Backend) Send(pkts []backend.Outgoing) error {
	if b.closed.Load() {
		return errClosed
	}
	var err error
	var dst netip.AddrPort
	var to *Backend
	for i := range pkts {
		d := &pkts[i]
		if len(d.Buf) < rocev2.ICRCLen {
			err = errShort
			continue
		}
		// A batch usually goes to one peer: look it up once.
		if a := netip.AddrPortFrom(d.Dst.Addr().Unmap(), d.Dst.Port()); a != dst || to == nil {
			dst, to = a, b.net.lookup(a)
		}
		fl := rocev2.NewFlow(b.local, dst)
		d.Wire = backend.Wire{}
		b.net.sent.Add(1)
		switch {
		case to == nil || dst.Addr().Is4() != b.local.Addr().Is4():
			b.net.noRoute.Add(1)
			continue
		case len(d.Buf)+b.hdrLen > b.net.cfg.MTU:
			b.net.tooBig.Add(1)
			continue
		}
		fl.SealICRC(d.Buf)
		switch to.deliver(d.Buf, b.local) {
		case delivered:
			b.net.delivered.Add(1)
		case full:
			b.net.queueFull.Add(1)
		case gone:
			b.net.noRoute.Add(1)
		}
	}
	return err
}

// What became of a delivered packet.
type outcome uint8

const (
	delivered outcome = iota
	full              // the receive queue was full
	gone              // the receiver closed after the sender looked it up
)

// deliver copies pkt into the receive queue.
func (b *Backend) deliver(pkt []byte, src netip.AddrPort) outcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shut {
		return gone
	}
	if b.n == len(b.queue) {
		return full
	}
	var buf []byte
	if k := len(b.free); k > 0 && cap(b.free[k-1]) >= len(pkt) {
		buf, b.free = b.free[k-1][:0], b.free[:k-1]
	} else {
		buf = make([]byte, 0, max(len(pkt), minBufCap))
	}
	b.queue[(b.head+b.n)%len(b.queue)] = queued{buf: append(buf, pkt...), src: src}
	b.n++
	b.ready.Signal()
	return delivered
}

// Receive blocks until packets are queued, moves up to len(pkts) of them in
// FIFO order into pkts and checks their ICRCs. The Bufs stay valid until the
// next call. After Close it returns an error wrapping
// backend.ErrBackendClosed.
func (b *Backend) Receive(pkts []backend.Incoming) (int, error) {
	return b.receive(pkts, true)
}

var _ backend.Poller = (*Backend)(nil)

// Serve is the receive loop of backend.Poller: it calls drain while it
// reports more, and waits for a packet to be queued between calls, until
// Close. With it, a device lets busy-polling CQs receive on their own
// goroutine (device.Poller), as over UDP.
func (b *Backend) Serve(drain func() bool) error { return b.ServeUntil(drain, nil) }

var _ backend.Lendable = (*Backend)(nil)

// ServeUntil is backend.Lendable's: Serve until done (nil: never) reports
// true or Interrupt is called.
func (b *Backend) ServeUntil(drain, done func() bool) error {
	for {
		for drain() {
		}
		if done != nil && done() {
			return nil
		}
		b.mu.Lock()
		for b.n == 0 && !b.shut && !b.kicked {
			b.ready.Wait()
		}
		shut, kicked := b.shut, b.kicked
		b.kicked = false
		b.mu.Unlock()
		if shut {
			return errClosed
		}
		if kicked {
			return nil
		}
	}
}

// Interrupt is backend.Lendable's: the ServeUntil in progress, or the next
// one to sleep, returns.
func (b *Backend) Interrupt() {
	b.mu.Lock()
	b.kicked = true
	b.ready.Broadcast()
	b.mu.Unlock()
}

// TryReceive is Receive without waiting: it returns 0 when nothing is
// queued.
func (b *Backend) TryReceive(pkts []backend.Incoming) (int, error) {
	return b.receive(pkts, false)
}

func (b *Backend) receive(pkts []backend.Incoming, wait bool) (int, error) {
	b.mu.Lock()
	// The caller is done with the previous batch.
	b.free = append(b.free, b.lent...)
	clear(b.lent)
	b.lent = b.lent[:0]
	if len(pkts) == 0 {
		b.mu.Unlock()
		return 0, nil
	}
	for wait && b.n == 0 && !b.shut {
		b.ready.Wait()
	}
	if b.shut {
		b.mu.Unlock()
		return 0, errClosed
	}
	n := min(len(pkts), b.n)
	for i := range n {
		q := &b.queue[b.head]
		pkts[i] = backend.Incoming{Buf: q.buf, Src: q.src}
		b.lent = append(b.lent, q.buf)
		*q = queued{}
		b.head = (b.head + 1) % len(b.queue)
	}
	b.n -= n
	b.mu.Unlock()

	for i := range pkts[:n] {
		d := &pkts[i]
		fl := rocev2.NewFlow(d.Src, b.local)
		d.TTL = fl.TTL // every memlink packet travels as NewFlow sends it
		if fl.VerifyICRC(d.Buf) {
			d.ICRC = backend.ICRCOK
		} else {
			d.ICRC = backend.ICRCBad
		}
	}
	return n, nil
}

// LocalAddr returns the attached address.
func (b *Backend) LocalAddr() netip.AddrPort { return b.local }

// BatchSize returns the network's configured batch size.
func (b *Backend) BatchSize() int { return b.net.cfg.BatchSize }

// LinkMTU returns the network's MTU.
func (b *Backend) LinkMTU() int { return b.net.cfg.MTU }

// Close detaches the backend, drops its queue and wakes a blocked Receive.
// Closing twice is a no-op.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	b.net.detach(b)
	b.mu.Lock()
	b.shut = true
	clear(b.queue)
	b.n = 0
	b.free, b.lent = nil, nil
	b.ready.Broadcast()
	b.mu.Unlock()
	return nil
}
