package udp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"golang.org/x/sys/unix"
)

// Send seals each datagram's ICRC in place, records the IPv4 ID it leaves
// with, and hands the datagrams to the kernel in order, BatchSize per
// sendmmsg. Each datagram must have a Buf of its own: the datagrams of a GSO
// run are sealed for different IDs before any is sent.
//
// A datagram that cannot be sent (bad destination, a size the path refuses)
// is dropped, like a NIC would, and the others still go; Send then returns
// the first such error.
func (b *Backend) Send(pkts []backend.Outgoing) error {
	if b.closed.Load() {
		return errClosed
	}
	b.tx.Lock()
	defer b.tx.Unlock()
	var first error
	for len(pkts) > 0 {
		n, err := b.sendChunk(pkts)
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

// sendChunk plans, seals and sends up to BatchSize datagrams from the start
// of pkts and returns how many it is done with. If the kernel refuses GSO,
// it turns GSO off and returns at the message that failed, whose datagrams
// the next call plans again, sealed for ID 0.
func (b *Backend) sendChunk(pkts []backend.Outgoing) (int, error) {
	var first error
	m := &b.tx.m
	gso := b.gso.Load()
	msgs, iovs, i := 0, 0, 0
	for i < len(pkts) && iovs < b.batch {
		d := &pkts[i]
		dst, ok := b.dest(d.Dst)
		if !ok || len(d.Buf) < rocev2.ICRCLen {
			if first == nil {
				first = errDest
				if ok {
					first = errShort
				}
			}
			i++ // dropped
			continue
		}
		run := 1
		if gso {
			run = gsoRun(pkts[i:], dst, min(b.batch-iovs, maxGSOSegments), b.maxSeg)
		}
		b.seal(pkts[i:i+run], dst, run > 1)

		h := &m.hdrs[msgs].Hdr
		h.Name = &m.names[msgs][0]
		h.Namelen = putSockaddr(&m.names[msgs], dst, b.ipv6, b.scopeOf(dst))
		for k := range run {
			iov := &m.iovs[iovs+k]
			buf := pkts[i+k].Buf
			iov.Base = &buf[0]
			iov.SetLen(len(buf))
		}
		h.Iov = &m.iovs[iovs]
		h.SetIovlen(run)
		h.Control = nil
		h.SetControllen(0)
		if run > 1 {
			c := m.control(msgs)
			h.Control = &c[0]
			h.SetControllen(putSegmentCmsg(c, uint16(len(pkts[i].Buf))))
		}
		b.tx.first[msgs], b.tx.segs[msgs] = i, run
		msgs++
		iovs += run
		i += run
	}

	for sent := 0; sent < msgs; {
		n, err := b.tx.write(m.hdrs[sent:msgs])
		sent += n
		if err == nil {
			continue
		}
		// sendmmsg reports an error only when it sent nothing: message sent
		// failed.
		if b.closed.Load() {
			clear(m.iovs[:iovs])
			return i, errClosed
		}
		if b.tx.segs[sent] > 1 && refusesGSO(err) {
			b.gso.Store(false)
			clear(m.iovs[:iovs])
			return b.tx.first[sent], first
		}
		if first == nil {
			first = fmt.Errorf("udp: send to %v: %w", pkts[b.tx.first[sent]].Dst, err)
		}
		sent++ // drop the message, send the rest
	}
	clear(m.iovs[:iovs]) // do not keep the caller's buffers alive
	return i, first
}

// seal seals the ICRCs of one message's datagrams. A plain datagram leaves
// with IPv4 ID 0; the kernel numbers the segments of a GSO message 0, 1, 2, …
func (b *Backend) seal(pkts []backend.Outgoing, dst netip.AddrPort, segmented bool) {
	fl := rocev2.NewFlow(b.local, dst)
	for k := range pkts {
		if segmented && !b.ipv6 {
			fl.IPv4ID = uint16(k)
		}
		fl.SealICRC(pkts[k].Buf)
		pkts[k].Wire = backend.Wire{IPv4ID: fl.IPv4ID}
	}
}

// dest normalizes a destination for the socket's family.
func (b *Backend) dest(ap netip.AddrPort) (netip.AddrPort, bool) { return destFor(ap, b.ipv6) }

// scopeOf returns the IPv6 scope (interface index) to send to dst with: its
// zone if it has one, else ours for a link-local destination.
func (b *Backend) scopeOf(dst netip.AddrPort) uint32 {
	a := dst.Addr()
	if !b.ipv6 || !a.IsLinkLocalUnicast() {
		return 0
	}
	if z := a.Zone(); z != "" && z != b.local.Addr().Zone() {
		return zoneIndex(z)
	}
	return b.scope
}

// sendmmsg is the default tx.write.
func (b *Backend) sendmmsg(hdrs []unix.Mmsghdr) (int, error) {
	return b.tx.call.Do(b.rc, hdrs)
}

// refusesGSO reports whether a send failed because the kernel will not do
// UDP_SEGMENT on this socket: EIO when the route's device cannot checksum
// (a hard requirement of GSO), EINVAL for the socket's other preconditions.
// wireguard-go and quic-go fall back the same way.
func refusesGSO(err error) bool {
	return errors.Is(err, unix.EIO) || errors.Is(err, unix.EINVAL)
}
