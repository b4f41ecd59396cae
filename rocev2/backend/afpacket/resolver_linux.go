package afpacket

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rocev2/backend"
)

// Neighbour resolution, in the send path's terms: Send looks the
// destination up in the resolver's cache (a mutex and a map lookup, or
// nothing at all when it is the same destination as the packet before).
// A destination not yet resolved parks the packet (a copy, in slots
// allocated once) and wakes the resolver goroutine, which asks the kernel
// (netlink_linux.go) and, once the MAC is known, sends what was parked.
// That is what the kernel does with a packet whose neighbour is
// incomplete (it queues it on the entry), and what a NIC driver sees of
// it. A destination the kernel cannot resolve within its timeout (3 s) fails:
// its parked packets are dropped, and packets to it are refused for
// failedFor before the kernel is asked again.
//
// A resolved entry is checked again in the background once it is older
// than refreshAfter, keeping its MAC meanwhile: the kernel may have
// learned a new one.

const (
	defaultResolveTimeout = 3 * time.Second // the kernel's ARP gives up after 3 probes a second apart
	failedFor             = time.Second
	refreshAfter          = 10 * time.Second
	maxNeighbours         = 4096 // destinations cached; beyond, sends to new ones fail
	parkSlots             = 128  // packets parked for all unresolved destinations together (the kernel queues ~100 per neighbour)

	// retry backs off from retryMin to retryMax while a destination
	// resolves.
	retryMin = time.Millisecond
	retryMax = 100 * time.Millisecond
)

var (
	errParkFull = errors.New("afpacket: too many packets wait for neighbour resolution; dropped")
	errTooMany  = fmt.Errorf("afpacket: more than %d destinations", maxNeighbours)
)

type neighState uint8

const (
	neighResolving neighState = iota
	neighResolved
	neighFailed
)

type neighbour struct {
	state      neighState
	mac        [6]byte
	since      time.Time // resolution started, or the MAC was learned, or it failed
	next       time.Time // when the resolver next asks
	backoff    time.Duration
	refreshing bool
	err        error // why it failed
	parked     []int // park slots, in order
}

// parked is one packet waiting for its destination's MAC, sealed for hdr
// (all but the MAC), with which it leaves.
type parked struct {
	d   backend.Outgoing
	hdr header
	buf []byte // the slot's memory; d.Buf points into it
}

type resolver struct {
	b       *Backend
	nl      *netlinkConn
	mu      sync.Mutex
	timeout time.Duration // how long the kernel gets to resolve (tests shorten it)
	entries map[netip.Addr]*neighbour
	gen     atomic.Uint64 // bumped when any entry's MAC or state changes
	slots   []parked
	free    []int
	dropped atomic.Uint64 // parked packets dropped: failed resolution or no room

	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

func newResolver(b *Backend, nl *netlinkConn, slotSize int) *resolver {
	r := &resolver{
		b: b, nl: nl,
		timeout: defaultResolveTimeout,
		entries: map[netip.Addr]*neighbour{},
		slots:   make([]parked, parkSlots),
		free:    make([]int, 0, parkSlots),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	mem := make([]byte, parkSlots*slotSize)
	for i := range r.slots {
		r.slots[i].buf = mem[i*slotSize : (i+1)*slotSize : (i+1)*slotSize]
		r.free = append(r.free, i)
	}
	if nl != nil {
		go r.run()
	} else {
		close(r.stopped) // a test's resolver: seeded, never asks the kernel
	}
	return r
}

// stop ends the resolver goroutine and waits for it.
func (r *resolver) stop() {
	close(r.done)
	<-r.stopped
}

// seed records a resolved neighbour (tests).
func (r *resolver) seed(dst netip.Addr, mac [6]byte) {
	r.mu.Lock()
	r.entries[dst] = &neighbour{state: neighResolved, mac: mac, since: time.Now().Add(time.Hour)}
	r.mu.Unlock()
	r.gen.Add(1)
}

func (r *resolver) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// lookup returns the MAC for dst when it is known. Otherwise it parks a
// copy of d with h, the headers it was sealed for (sent once resolved), and
// returns false with a nil error, or returns the error that makes d
// undeliverable.
func (r *resolver) lookup(dst netip.Addr, d *backend.Outgoing, h *header, now time.Time) ([6]byte, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[dst]
	switch {
	case e == nil:
		if len(r.entries) >= maxNeighbours {
			r.evictFailed()
			if len(r.entries) >= maxNeighbours {
				return [6]byte{}, false, errTooMany
			}
		}
		e = &neighbour{state: neighResolving, since: now, next: now, backoff: retryMin}
		r.entries[dst] = e
		r.poke()
	case e.state == neighResolved:
		if !e.refreshing && now.Sub(e.since) > refreshAfter {
			e.refreshing, e.next = true, now
			r.poke()
		}
		return e.mac, true, nil
	case e.state == neighFailed:
		if now.Sub(e.since) < failedFor {
			return [6]byte{}, false, e.err
		}
		e.state, e.since, e.next, e.backoff, e.err = neighResolving, now, now, retryMin, nil
		r.gen.Add(1)
		r.poke()
	}
	return [6]byte{}, false, r.park(e, d, h)
}

// park copies d and its headers into a free slot of e's queue. mu is held.
func (r *resolver) park(e *neighbour, d *backend.Outgoing, h *header) error {
	if len(r.free) == 0 || len(d.Buf) > len(r.slots[0].buf) {
		r.dropped.Add(1)
		return errParkFull
	}
	i := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	s := &r.slots[i]
	s.d, s.hdr = *d, *h
	s.d.Buf = s.buf[:copy(s.buf, d.Buf)]
	e.parked = append(e.parked, i)
	return nil
}

// evictFailed forgets failed destinations to make room. mu is held.
func (r *resolver) evictFailed() {
	for a, e := range r.entries {
		if e.state == neighFailed {
			delete(r.entries, a)
		}
	}
}

// run is the resolver goroutine: it works on the entries that are due and
// sleeps until the next one is, or until lookup wakes it.
func (r *resolver) run() {
	defer close(r.stopped)
	defer r.nl.close()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := r.work(time.Now())
		if !next.IsZero() {
			t.Reset(max(time.Until(next), 0))
		}
		select {
		case <-r.done:
			return
		case <-r.wake:
		case <-t.C:
		}
	}
}

// work asks the kernel about every entry that is due and returns when the
// next one will be (zero: none waits).
func (r *resolver) work(now time.Time) time.Time {
	type job struct {
		dst     netip.Addr
		refresh bool
	}
	var jobs []job
	var next time.Time
	r.mu.Lock()
	for a, e := range r.entries {
		due := e.state == neighResolving || e.refreshing
		if !due {
			continue
		}
		if !e.next.After(now) {
			jobs = append(jobs, job{a, e.state == neighResolved})
		} else if next.IsZero() || e.next.Before(next) {
			next = e.next
		}
	}
	r.mu.Unlock()
	for _, j := range jobs {
		mac, ok, err := r.ask(j.dst)
		if n := r.settle(j.dst, mac, ok, err, time.Now()); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next
}

// ask asks the kernel for dst's next hop and that hop's MAC, and when the
// kernel has no valid entry, asks it to resolve one.
func (r *resolver) ask(dst netip.Addr) ([6]byte, bool, error) {
	l := &r.b.link
	hop, err := r.nl.nextHop(l.addr, dst, l.index)
	if err != nil {
		return [6]byte{}, false, err
	}
	mac, ok, err := r.nl.neighbour(hop, l.index)
	if err != nil || ok {
		return mac, ok, err
	}
	return [6]byte{}, false, r.nl.use(hop, l.index)
}

// settle records what ask found for dst, sends what was parked once the
// MAC is known, and returns when dst is due again (zero: not until it is
// used).
func (r *resolver) settle(dst netip.Addr, mac [6]byte, ok bool, err error, now time.Time) time.Time {
	// The send lock is taken first (the order Send takes them in) and
	// kept until the parked packets are out: a packet sent after the
	// state changes must not overtake them.
	r.b.tx.Lock()
	defer r.b.tx.Unlock()
	r.mu.Lock()
	e := r.entries[dst]
	if e == nil {
		r.mu.Unlock()
		return time.Time{}
	}
	if e.state == neighResolved { // a refresh
		e.refreshing = false
		if ok && mac != e.mac {
			e.mac = mac
			r.gen.Add(1)
		}
		if ok || err == nil {
			e.since = now // the kernel confirms or re-probes: keep the old MAC meanwhile
		}
		r.mu.Unlock()
		return time.Time{}
	}
	switch {
	case ok:
		e.state, e.mac, e.since = neighResolved, mac, now
	case err != nil || now.Sub(e.since) >= r.timeout:
		if err == nil {
			err = fmt.Errorf("no answer to ARP or neighbour solicitation in %v", r.timeout)
		}
		e.state, e.since = neighFailed, now
		e.err = fmt.Errorf("afpacket: cannot reach %v on %s: %w", dst, r.b.link.name, err)
	default:
		e.next = now.Add(e.backoff)
		e.backoff = min(2*e.backoff, retryMax)
		r.mu.Unlock()
		return e.next
	}
	r.gen.Add(1)
	slots := e.parked
	e.parked = nil
	r.mu.Unlock()
	if len(slots) == 0 {
		return time.Time{}
	}
	if e.state == neighResolved {
		r.sendParked(slots, mac)
	} else {
		r.dropped.Add(uint64(len(slots)))
	}
	r.mu.Lock()
	r.free = append(r.free, slots...)
	r.mu.Unlock()
	return time.Time{}
}

// sendParked sends parked packets to mac, in the order they were parked,
// each with the headers it was sealed for. The send lock is held.
func (r *resolver) sendParked(slots []int, mac [6]byte) {
	batch := make([]backend.Outgoing, 0, len(slots))
	hdrs := make([]header, 0, len(slots))
	for _, i := range slots {
		batch = append(batch, r.slots[i].d)
		h := r.slots[i].hdr
		h.dstMAC = mac
		hdrs = append(hdrs, h)
	}
	_ = r.b.sendLocked(batch, hdrs) // errors: the packets are lost, as any the network drops
}
