package shm

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2"
)

// A peer is what the backend knows of one destination: whether it is
// paired, being paired or without a pairing (and until when), and the
// private queue of what waits for it. A pairing is one rendezvous's
// shared objects; a peer outlives its pairings (a peer process that dies
// and comes back pairs anew on the same peer).
//
// Who touches what:
//
//	peer.state, pair, q, retryAt, dialing, answering   under peer.txMu (state, retryAt: atomics read without it)
//	pairing.out (our ring to the peer)                 under peer.txMu
//	pairing.in, broken, the slots                      under Backend.rxMu
//	pairing.bell (the peer's doorbell)                 its own RWMutex: rung by anyone
//
// A pairing is torn down only by its watcher (the goroutine reading its
// rendezvous connection), which takes rxMu to take the receiving side out
// of the slots, then txMu to take the sending side from the peer, and only
// then unmaps: no Send, Receive or WaitReadable can be inside a ring when
// it goes. Whoever finds a ring corrupt closes the connection, which ends
// the watcher's read.

// Peer states.
const (
	stateConnecting int32 = iota // a rendezvous is under way; packets wait in q
	statePaired                  // packets go into pair.out
	stateNone                    // no pairing: fallback or drop, until retryAt
)

type peer struct {
	addr netip.AddrPort
	flow rocev2.Flow // from us to the peer: what Send seals for

	state      atomic.Int32 // written under txMu
	backlogged atomic.Bool  // q is not empty (the receive path flushes it)
	retryAt    atomic.Int64 // stateNone: the next rendezvous attempt, in Backend.now's terms; written under txMu

	txMu      sync.Mutex
	pair      *pairing
	q         backlog
	dialing   bool          // a dial goroutine runs
	answering bool          // an incoming rendezvous is being answered
	settled   chan struct{} // closed when a pairing is installed (a dialer told "busy" waits on it)
}

func newPeer(b *Backend, addr netip.AddrPort) *peer {
	p := &peer{addr: addr, flow: rocev2.NewFlow(b.local, addr), settled: make(chan struct{})}
	p.q.limit = b.cfg.Backlog
	return p
}

// pairing is one live rendezvous: the two rings, the doorbells and the
// connection whose end is the pairing's end.
type pairing struct {
	peer     *peer
	from     netip.AddrPort
	rflow    rocev2.Flow // from the peer to us: what Receive verifies
	instance uint64
	conn     *net.UnixConn
	kill     func() // closes conn once: the watcher then tears down

	out    producer // under peer.txMu
	outMem []byte
	in     consumer // under rxMu
	inMem  []byte
	broken bool // under rxMu: in is corrupt, no more reads
	slot   int
	gen    uint32
	mine   int      // our doorbell: the peer rings it
	bell   doorbell // the peer's
}

func newPairing(b *Backend, p *peer, c *net.UnixConn, h hello, mine half, inMem []byte, bell int) *pairing {
	pr := &pairing{
		peer: p, from: p.addr, rflow: rocev2.NewFlow(p.addr, b.local), instance: h.instance, conn: c,
		outMem: mine.mem, inMem: inMem, mine: mine.bell, bell: doorbell{fd: bell}, slot: -1,
	}
	pr.kill = sync.OnceFunc(func() { c.Close() })
	out, _ := newRing(mine.mem) // made by newHalf: valid
	pr.out = producer{ring: out}
	in, _ := newRing(inMem) // checked size: valid
	pr.in = consumer{ring: in, max: maxPacket}
	// Asleep until the receive path looks at it: the device's receive
	// goroutine may have gone to sleep before this ring existed, and the
	// producer's first publish must ring our doorbell.
	pr.in.sleep()
	return pr
}

var errFull = errors.New("shm: the pairing table is full (Config.MaxPeers)")

// install makes pr live: its receiving side joins the slots, then the peer
// sends through it, what waited in the peer's queue first. It fails if the
// table is full or the peer got another pairing meanwhile.
func (b *Backend) install(pr *pairing) error {
	b.rxMu.Lock()
	slot := -1
	for i, s := range b.slots {
		if s == nil {
			slot = i
			break
		}
	}
	if slot < 0 {
		b.rxMu.Unlock()
		return errFull
	}
	b.gen++
	pr.slot, pr.gen = slot, b.gen
	if err := b.wait.add(pr.mine, slot, pr.gen); err != nil {
		b.rxMu.Unlock()
		return err
	}
	b.slots[slot] = pr
	b.rxMu.Unlock()

	p := pr.peer
	p.txMu.Lock()
	old := p.pair
	if old != nil && old.instance == pr.instance {
		p.txMu.Unlock()
		b.unslot(pr)
		return errors.New("shm: already paired with this peer")
	}
	p.pair = pr
	p.state.Store(statePaired)
	select {
	case <-p.settled:
	default:
		close(p.settled)
	}
	b.stats.pairings.Add(1)
	b.stats.paired.Add(1)
	wake := b.flush(p, pr)
	p.txMu.Unlock()
	if old != nil {
		old.kill() // a peer process that restarted: its old pairing is dead
	}
	if wake {
		b.ring(pr)
	}
	return nil
}

// unslot takes pr's receiving side out of the slots.
func (b *Backend) unslot(pr *pairing) {
	b.rxMu.Lock()
	if pr.slot >= 0 && b.slots[pr.slot] == pr {
		b.slots[pr.slot] = nil
		b.wait.remove(pr.mine)
	}
	pr.slot = -1
	b.rxMu.Unlock()
}

// teardown ends a pairing whose connection is gone: the peer sends no more
// through it (it goes without a pairing until RetryAfter), what waited for
// it is dropped, and the rings and descriptors go.
func (b *Backend) teardown(pr *pairing) {
	b.unslot(pr)
	p := pr.peer
	p.txMu.Lock()
	b.detach(p, pr)
	pr.out = producer{}
	p.txMu.Unlock()
	b.stats.paired.Add(^uint64(0))
	pr.bell.close()
	unmap(pr.outMem)
	unmap(pr.inMem)
	closeFD(pr.mine)
	pr.kill()
}

// detach takes pr from p if it is p's pairing: p goes without one, and
// what waited for it is dropped. txMu is held.
func (b *Backend) detach(p *peer, pr *pairing) {
	if p.pair != pr {
		return
	}
	p.pair = nil
	b.noPairing(p)
	b.stats.dropped.Add(uint64(p.q.n))
	p.q.reset()
	p.backlogged.Store(false)
}

// noPairing marks p as without a pairing until RetryAfter. txMu is held.
func (b *Backend) noPairing(p *peer) {
	p.retryAt.Store(b.now() + int64(b.cfg.RetryAfter))
	p.state.Store(stateNone)
	p.settled = make(chan struct{})
}

// flush moves what waits in p's queue into pr's ring, as far as it has
// room, and flags that the producer waits for room if some is left. It
// reports whether the consumer must be woken. txMu is held.
func (b *Backend) flush(p *peer, pr *pairing) (wake bool) {
	for {
		for p.q.n > 0 {
			pkt, ttl, tos := p.q.peek()
			ok, err := pr.out.put(pkt, ttl, tos)
			if err != nil {
				b.corruptOut(p, pr)
				return false
			}
			if !ok {
				break
			}
			b.stats.sentPackets.Add(1)
			b.stats.sentBytes.Add(uint64(len(pkt)))
			p.q.take()
		}
		if pr.out.publish() {
			wake = true
		}
		if p.q.n == 0 {
			p.backlogged.Store(false)
			return wake
		}
		p.backlogged.Store(true)
		pkt, _, _ := p.q.peek()
		room, err := pr.out.wantRoom(len(pkt))
		if err != nil {
			b.corruptOut(p, pr)
			return false
		}
		if !room {
			return wake
		}
	}
}

// corruptOut ends a pairing whose consumer wrote a head no consumer could:
// p sends through it no more. txMu is held.
func (b *Backend) corruptOut(p *peer, pr *pairing) {
	b.stats.corrupt.Add(1)
	b.detach(p, pr)
	pr.kill()
}

// corruptIn ends a pairing whose producer broke our receiving ring's
// rules: it is read no more. rxMu is held.
func (b *Backend) corruptIn(pr *pairing) {
	b.stats.corrupt.Add(1)
	pr.broken = true
	pr.kill()
}

func unmap(mem []byte) {
	if mem != nil {
		unix.Munmap(mem)
	}
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
