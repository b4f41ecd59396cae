package shm

import (
	"net/netip"

	"github.com/goroce/goroce/rocev2/backend"

	"github.com/goroce/goroce/rocev2"
)

// Send seals each datagram's ICRC for the flow from the backend's address
// to its destination with IPv4 ID 0 (as the UDP backend sends a plain
// datagram) and hands it to the destination's link:
//
//   - paired: copied into the peer's ring; a run of datagrams to one peer
//     is published once and wakes the peer at most once, and only if it
//     sleeps. What finds the ring full waits in the peer's private queue,
//     which leaves first when the consumer has made room (it rings our
//     doorbell); beyond the queue's bound, datagrams are dropped and
//     counted.
//   - being paired: copied into the peer's private queue; the rendezvous
//     runs on a goroutine of the backend, never on the caller's.
//   - without a pairing: handed to the fallback, or dropped and counted.
//
// Send never waits for a peer: a dead or stuck one costs its queue, not a
// hang. It fails only after Close, or for datagrams no link could carry
// (the others still go), with the first such error.
func (b *Backend) Send(pkts []backend.Outgoing) error {
	if b.closed.Load() {
		return errClosed
	}
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	for i := 0; i < len(pkts); {
		dst, err := b.check(&pkts[i])
		if err != nil {
			b.stats.dropped.Add(1)
			keep(err)
			i++
			continue
		}
		j := i + 1
		if p := b.route(dst); p != nil {
			// Every packet of the run is checked as the first was: a
			// short one would break the seal, a long one the peer's ring.
			for j < len(pkts) {
				if d, err := b.check(&pkts[j]); err != nil || d != dst {
					break
				}
				j++
			}
			i += b.sendTo(p, pkts[i:j])
			if i == j {
				continue
			}
			// The pairing ended under us: the rest goes the other way.
		} else {
			// A route is looked up where the destination changes, not
			// per packet.
			for last := dst; j < len(pkts); j++ {
				d, err := b.check(&pkts[j])
				if err != nil {
					break
				}
				if d != last {
					if b.route(d) != nil {
						break
					}
					last = d
				}
			}
		}
		keep(b.toFallback(pkts[i:j]))
		i = j
	}
	return first
}

// check returns d's destination, normalized, or why no link can carry d.
func (b *Backend) check(d *backend.Outgoing) (netip.AddrPort, error) {
	a := d.Dst.Addr().Unmap()
	if d.Dst.Port() == 0 || !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.Is4() != b.local.Addr().Is4() {
		return netip.AddrPort{}, errDest
	}
	switch {
	case len(d.Buf) < rocev2.ICRCLen:
		return netip.AddrPort{}, errShort
	case len(d.Buf) > maxPacket:
		return netip.AddrPort{}, errTooBig
	}
	return netip.AddrPortFrom(a, d.Dst.Port()), nil
}

// route returns the peer whose link carries packets to dst, or nil for the
// fallback. A destination never tried, or whose RetryAfter has passed,
// starts a rendezvous.
func (b *Backend) route(dst netip.AddrPort) *peer {
	b.mu.RLock()
	p := b.peers[dst]
	b.mu.RUnlock()
	if p != nil {
		switch p.state.Load() {
		case statePaired, stateConnecting:
			return p
		}
		if b.now() < p.retryAt.Load() {
			return nil
		}
	}
	if dst == b.local {
		return nil // ourselves: no pairing
	}
	return b.startDial(dst)
}

// startDial makes dst's peer connecting and starts its rendezvous.
func (b *Backend) startDial(dst netip.AddrPort) *peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nil
	}
	p := b.peers[dst]
	if p == nil {
		if len(b.peers) >= b.cfg.MaxPeers+maxFailed && !b.evictLocked() {
			return nil
		}
		p = newPeer(b, dst)
		p.state.Store(stateNone)
		b.peers[dst] = p
	}
	p.txMu.Lock()
	defer p.txMu.Unlock()
	switch {
	case p.state.Load() != stateNone:
		return p
	case p.answering:
		// The peer's dial is being answered: what we send now waits in
		// the queue for that pairing (admitted drains it to the fallback
		// should the answer fail), as it would for our own dial; sent to
		// the fallback instead, it would be lost where there is none.
		p.state.Store(stateConnecting)
		return p
	case p.dialing || b.now() < p.retryAt.Load():
		return nil
	}
	p.state.Store(stateConnecting)
	p.dialing = true
	b.wg.Add(1) // under mu, closed checked: Close waits for it
	go func() {
		defer b.wg.Done()
		b.dial(p)
	}()
	return p
}

// evictLocked forgets one destination without a pairing, to make room in
// the table; false if every entry is in use. mu is held.
func (b *Backend) evictLocked() bool {
	for a, p := range b.peers {
		if !p.txMu.TryLock() {
			continue
		}
		idle := p.state.Load() == stateNone && p.pair == nil && !p.dialing && !p.answering
		p.txMu.Unlock()
		if idle {
			delete(b.peers, a)
			return true
		}
	}
	return false
}

// sendTo hands pkts, all to p, to p's ring or queue and returns how many it
// took: fewer when p has (or gets) no pairing, and the rest go to the
// fallback.
func (b *Backend) sendTo(p *peer, pkts []backend.Outgoing) int {
	p.txMu.Lock()
	switch p.state.Load() {
	case stateConnecting:
		for i := range pkts {
			d := b.seal(p, &pkts[i])
			if !p.q.push(d.Buf, ttlOf(d.Sender), d.Sender.TrafficClass) {
				b.stats.dropped.Add(1)
			}
		}
		p.txMu.Unlock()
		return len(pkts)
	case statePaired:
	default:
		p.txMu.Unlock()
		return 0
	}
	pr := p.pair
	wake := false
	if p.q.n > 0 {
		wake = b.flush(p, pr)
	}
	for i := range pkts {
		if p.pair != pr { // corrupt: detached
			p.txMu.Unlock()
			return i
		}
		d := b.seal(p, &pkts[i])
		ttl, tos := ttlOf(d.Sender), d.Sender.TrafficClass
		if p.q.n == 0 {
			ok, err := pr.out.put(d.Buf, ttl, tos)
			if err != nil {
				b.corruptOut(p, pr)
				continue
			}
			if ok {
				b.stats.sentPackets.Add(1)
				b.stats.sentBytes.Add(uint64(len(d.Buf)))
				continue
			}
		}
		if p.q.push(d.Buf, ttl, tos) {
			b.stats.overflow.Add(1)
		} else {
			b.stats.dropped.Add(1)
		}
	}
	if p.pair == pr {
		if pr.out.publish() {
			wake = true
		}
		if p.q.n > 0 && b.flush(p, pr) {
			wake = true
		}
	}
	p.txMu.Unlock()
	if wake {
		b.ring(pr)
	}
	return len(pkts)
}

// seal seals d for the ring: IPv4 ID 0, as the UDP backend's plain sends.
func (b *Backend) seal(p *peer, d *backend.Outgoing) *backend.Outgoing {
	p.flow.SealICRC(d.Buf)
	d.Wire = backend.Wire{}
	return d
}

// ttlOf is the TTL (hop limit) a packet carries: its address vector's, else
// 64, what the UDP backend's socket sends with.
func ttlOf(s backend.Sender) uint8 {
	if s.HopLimit != 0 {
		return s.HopLimit
	}
	return 64
}

// toFallback hands pkts to the fallback, or drops and counts them.
func (b *Backend) toFallback(pkts []backend.Outgoing) error {
	if len(pkts) == 0 {
		return nil
	}
	if b.fallback == nil {
		b.stats.dropped.Add(uint64(len(pkts)))
		return nil
	}
	b.stats.fallback.Add(uint64(len(pkts)))
	return b.fallback.Send(pkts)
}

// drainToFallback hands what waits in p's queue to the fallback (or drops
// it), in order, and empties the queue. txMu is held.
func (b *Backend) drainToFallback(p *peer) {
	if p.q.n == 0 {
		return
	}
	if b.fallback == nil {
		b.stats.dropped.Add(uint64(p.q.n))
		p.q.reset()
		return
	}
	dgs := make([]backend.Outgoing, 0, b.batch) // once per failed rendezvous
	p.q.each(func(pkt []byte) {
		dgs = append(dgs, backend.Outgoing{Buf: pkt, Dst: p.addr})
		if len(dgs) == cap(dgs) {
			b.toFallback(dgs)
			dgs = dgs[:0]
		}
	})
	b.toFallback(dgs)
	p.q.reset()
	p.backlogged.Store(false)
}
