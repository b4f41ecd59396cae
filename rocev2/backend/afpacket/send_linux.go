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
// with, and hands the frames to the kernel in order, BatchSize per
// sendmmsg, each a header and the caller's packet (nothing is copied).
//
// The headers follow each datagram's Sender as rxe follows a QP's: the
// source port and IPv6 flow label from the QP's number and address vector
// (rocev2.SourcePort), the traffic class from the vector, the hop limit
// the system's (the route's, as ib_core gives rxe: systemHopLimit);
// IPv4 has DF and an ID from one sequence for the device; the UDP checksum
// is 0.
//
// A datagram whose destination's MAC is not known yet waits (a copy) until
// the kernel has resolved it, and is sent then; its IPv4ID is not known
// when Send returns (its SrcPort is). A datagram that cannot be
// sent (bad destination, too long, an unreachable peer) is dropped, like a
// NIC would, and the others still go; Send then returns the first such
// error.
func (b *Backend) Send(pkts []backend.Datagram) error {
	if b.closed.Load() {
		return errClosed
	}
	b.tx.Lock()
	defer b.tx.Unlock()
	return b.sendLocked(pkts)
}

// sendLocked is Send with the send lock held.
func (b *Backend) sendLocked(pkts []backend.Datagram) error {
	var first error
	now := time.Now()
	for len(pkts) > 0 {
		n, err := b.sendChunk(pkts, now)
		if err != nil {
			if errors.Is(err, errClosed) {
				return err
			}
			if first == nil {
				first = err
			}
		}
		pkts = pkts[n:]
	}
	return first
}

// sendChunk builds and sends up to BatchSize frames from the start of pkts
// and returns how many datagrams it is done with.
func (b *Backend) sendChunk(pkts []backend.Datagram, now time.Time) (int, error) {
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
		dst, ok := b.dest(d.Addr)
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
		d.SrcPort, _ = rocev2.SourcePort(d.Sender.QPN, d.Sender.FlowLabel, d.Buf)
		mac, ok, err := b.neighbourOf(dst.Addr(), d, now)
		if !ok {
			if err != nil {
				fail(err)
			}
			continue // parked: the resolver sends it
		}
		hdr := b.tx.headers[msgs*txHeaderLen : (msgs+1)*txHeaderLen] // the virtio_net_hdr stays zero
		hn := b.putHeader(hdr[vnetHdrLen:], d, dst, mac)
		seal(hdr[vnetHdrLen:vnetHdrLen+hn], d.Buf)

		iov := b.tx.iovs[2*msgs : 2*msgs+2]
		iov[0].Base = &hdr[0]
		iov[0].SetLen(vnetHdrLen + hn)
		iov[1].Base = &d.Buf[0]
		iov[1].SetLen(len(d.Buf))
		h := &b.tx.hdrs[msgs].Hdr
		h.Iov = &iov[0]
		h.SetIovlen(2)
		b.tx.index[msgs] = i
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
		fail(fmt.Errorf("afpacket: send to %v on %s: %w", pkts[b.tx.index[sent]].Addr, b.link.name, err))
		sent++ // drop the frame, send the rest
	}
	clear(b.tx.iovs[:2*msgs]) // do not keep the caller's buffers alive
	return i, first
}

// neighbourOf returns the MAC to send to dst with; a burst to one
// destination asks the resolver once.
func (b *Backend) neighbourOf(dst netip.Addr, d *backend.Datagram, now time.Time) ([6]byte, bool, error) {
	gen := b.neigh.gen.Load()
	if dst == b.tx.lastDst && gen == b.tx.lastGen {
		return b.tx.lastMAC, true, nil
	}
	mac, ok, err := b.neigh.lookup(dst, d, now)
	if ok {
		b.tx.lastDst, b.tx.lastMAC, b.tx.lastGen = dst, mac, gen
	}
	return mac, ok, err
}

// putHeader writes d's headers into hdr and records the ID and source port
// in d.
func (b *Backend) putHeader(hdr []byte, d *backend.Datagram, dst netip.AddrPort, mac [6]byte) int {
	sport, label := rocev2.SourcePort(d.Sender.QPN, d.Sender.FlowLabel, d.Buf)
	h := header{
		srcMAC: b.link.mac, dstMAC: mac,
		src: b.local.Addr().WithZone(""), dst: dst.Addr().WithZone(""),
		srcPort: sport, dstPort: dst.Port(),
		hopLimit: b.hopLimit, tclass: d.Sender.TrafficClass, flowLabel: label,
	}
	if !b.ipv6 {
		h.ipv4ID = b.tx.ipID
		b.tx.ipID++
	}
	d.IPv4ID, d.SrcPort = h.ipv4ID, sport
	return h.put(hdr, len(d.Buf))
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
