package afpacket

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

var (
	errDest    = errors.New("afpacket: send: destination is not a unicast address and port of the device's family on the wire (not loopback, not the device's own)")
	errShort   = errors.New("afpacket: send: datagram shorter than an ICRC")
	errTooLong = errors.New("afpacket: send: datagram longer than the interface's MTU allows")
)

// Send builds each datagram's Ethernet, IP and UDP headers, seals its ICRC
// over them in place, records the IPv4 ID and UDP source port it leaves
// with in its Wire, and hands the frames to the kernel in order, BatchSize
// per sendmmsg, each a header and the caller's packet (nothing is copied).
//
// The headers follow each datagram's Sender as rxe follows a QP's: the
// source port and IPv6 flow label from the QP's number and address vector
// (rocev2.SourcePort), the traffic class from the vector, the hop limit
// the system's (the route's, as ib_core gives rxe: systemHopLimit);
// IPv4 has DF and an ID from one sequence for the device; the UDP checksum
// is 0.
//
// A datagram whose destination's MAC is not known yet is sealed all the
// same (the ICRC does not cover the Ethernet header) and waits, a copy
// with the headers it was sealed for, until the kernel has resolved the
// MAC; it is sent then, exactly as Wire says. A datagram that cannot be
// sent (bad destination, too long, an unreachable peer) is dropped, like a
// NIC would, and the others still go; Send then returns the first such
// error.
func (b *Backend) Send(pkts []backend.Outgoing) error {
	if b.closed.Load() {
		return errClosed
	}
	b.tx.Lock()
	defer b.tx.Unlock()
	return b.sendLocked(pkts, nil)
}

// sendLocked is Send with the send lock held. preset, when not nil, holds
// the headers pkts were sealed for when they were parked (their MACs now
// resolved): they leave with those.
func (b *Backend) sendLocked(pkts []backend.Outgoing, preset []header) error {
	var first error
	now := time.Now()
	for len(pkts) > 0 {
		n, err := b.sendChunk(pkts, preset, now)
		if err != nil {
			if errors.Is(err, errClosed) {
				return err
			}
			if first == nil {
				first = err
			}
		}
		pkts = pkts[n:]
		if preset != nil {
			preset = preset[n:]
		}
	}
	return first
}

// sendChunk builds and sends up to BatchSize frames from the start of pkts
// and returns how many datagrams it is done with.
func (b *Backend) sendChunk(pkts []backend.Outgoing, preset []header, now time.Time) (int, error) {
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	ipHdr := rocev2.IPv4HeaderLen
	if b.ipv6 {
		ipHdr = rocev2.IPv6HeaderLen
	}
	msgs, i := 0, 0
	for ; i < len(pkts) && msgs < b.batch; i++ {
		d := &pkts[i]
		hdr := b.tx.headers[msgs*txHeaderLen : (msgs+1)*txHeaderLen] // the virtio_net_hdr stays zero
		if preset != nil {
			h := preset[i]
			hn := h.put(hdr[vnetHdrLen:], len(d.Buf))
			b.queue(msgs, i, hdr[:vnetHdrLen+hn], d.Buf)
			msgs++
			continue
		}
		dst, ok := b.dest(d.Dst)
		switch {
		case !ok:
			fail(errDest)
			continue
		case len(d.Buf) < rocev2.ICRCLen:
			fail(errShort)
			continue
		case ipHdr+rocev2.UDPHeaderLen+len(d.Buf) > b.link.mtu:
			fail(errTooLong)
			continue
		}
		// Sealed now, whether it leaves now or once its neighbour is
		// resolved: the caller's Buf is final when Send returns (a capture
		// tap records it then).
		h := b.header(d, dst)
		hn := h.put(hdr[vnetHdrLen:], len(d.Buf))
		seal(hdr[vnetHdrLen:vnetHdrLen+hn], d.Buf)
		mac, ok, err := b.neighbourOf(dst.Addr(), d, &h, now)
		if !ok {
			if err != nil {
				fail(err)
			}
			continue // parked, with h: the resolver sends it
		}
		copy(hdr[vnetHdrLen:vnetHdrLen+6], mac[:]) // the destination MAC, first in the frame
		b.queue(msgs, i, hdr[:vnetHdrLen+hn], d.Buf)
		msgs++
	}

	for sent := 0; sent < msgs; {
		n, err := b.tx.write(b.tx.hdrs[sent:msgs])
		sent += n
		if err == nil {
			continue
		}
		// sendmmsg reports an error only when it sent nothing: message
		// sent failed.
		if b.closed.Load() {
			clear(b.tx.iovs[:2*msgs])
			return i, errClosed
		}
		fail(fmt.Errorf("afpacket: send to %v on %s: %w", pkts[b.tx.index[sent]].Dst, b.link.name, err))
		sent++ // drop the frame, send the rest
	}
	clear(b.tx.iovs[:2*msgs]) // do not keep the caller's buffers alive
	return i, first
}

// queue puts message msgs of the batch together: the frame's headers and
// the caller's packet i.
func (b *Backend) queue(msgs, i int, hdr, pkt []byte) {
	iov := b.tx.iovs[2*msgs : 2*msgs+2]
	iov[0].Base = &hdr[0]
	iov[0].SetLen(len(hdr))
	iov[1].Base = &pkt[0]
	iov[1].SetLen(len(pkt))
	m := &b.tx.hdrs[msgs].Hdr
	m.Iov = &iov[0]
	m.SetIovlen(2)
	b.tx.index[msgs] = i
}

// neighbourOf returns the MAC to send to dst with, or parks d, sealed for
// h, until the kernel knows it; a burst to one destination asks the
// resolver once.
func (b *Backend) neighbourOf(dst netip.Addr, d *backend.Outgoing, h *header, now time.Time) ([6]byte, bool, error) {
	gen := b.neigh.gen.Load()
	if dst == b.tx.lastDst && gen == b.tx.lastGen {
		return b.tx.lastMAC, true, nil
	}
	mac, ok, err := b.neigh.lookup(dst, d, h, now)
	if ok {
		b.tx.lastDst, b.tx.lastMAC, b.tx.lastGen = dst, mac, gen
	}
	return mac, ok, err
}

// header returns d's headers but the destination MAC, taking the next
// IPv4 ID, and records the ID and source port in d.Wire.
func (b *Backend) header(d *backend.Outgoing, dst netip.AddrPort) header {
	sport, label := rocev2.SourcePort(d.Sender.QPN, d.Sender.FlowLabel, d.Buf)
	h := header{
		srcMAC: b.link.mac,
		src:    b.local.Addr().WithZone(""), dst: dst.Addr().WithZone(""),
		srcPort: sport, dstPort: dst.Port(),
		hopLimit: b.hopLimit, tclass: d.Sender.TrafficClass, flowLabel: label,
	}
	if !b.ipv6 {
		h.ipv4ID = b.tx.ipID
		b.tx.ipID++
	}
	d.Wire = backend.Wire{IPv4ID: h.ipv4ID, SrcPort: sport}
	return h
}

// dest normalizes a destination for the device's family.
func (b *Backend) dest(ap netip.AddrPort) (netip.AddrPort, bool) {
	a := ap.Addr().Unmap()
	if ap.Port() == 0 || a.Is4() == b.ipv6 || !a.IsValid() || a.IsUnspecified() || a.IsMulticast() ||
		a.IsLoopback() || a.WithZone("") == b.local.Addr().WithZone("") { // nothing on the wire reaches these
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.WithZone(""), ap.Port()), true
}

// sendmmsg is the default tx.write.
func (b *Backend) sendmmsg(hdrs []unix.Mmsghdr) (int, error) {
	return b.tx.call.Do(b.rc, hdrs)
}
