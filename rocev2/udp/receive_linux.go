package udp

import (
	"net/netip"

	"github.com/goroce/goroce/rocev2"
	"golang.org/x/sys/unix"
)

// Receive blocks until packets arrive and fills pkts[:n] with them, each
// with its ICRC verdict: ICRCOK (and for IPv4 the ID the packet travelled
// with, recovered from its ICRC) or ICRCBad. A truncated or empty datagram
// is reported ICRCBad. The Bufs point into the backend's receive buffers and
// stay valid until the next call. Receive returns an error wrapping
// rocev2.ErrBackendClosed after Close.
func (b *Backend) Receive(pkts []rocev2.Datagram) (int, error) {
	if len(pkts) == 0 {
		return 0, nil
	}
	for {
		if b.closed.Load() {
			return 0, errClosed
		}
		if n := b.drain(pkts); n > 0 {
			return n, nil
		}
		if err := b.recv(min(len(pkts), b.batch)); err != nil {
			return 0, err
		}
	}
}

// recv reads up to want messages; the buffers of the previous ones are all
// handed out by now.
func (b *Backend) recv(want int) error {
	m := &b.rx.m
	b.resetHeaders()
	n, err := b.rx.call.do(b.rc, m.hdrs[:want])
	if err != nil {
		return b.ioError("receive", err)
	}
	b.rx.count, b.rx.next, b.rx.off = n, 0, 0
	return nil
}

// resetHeaders restores the fields the kernel changed in the messages the
// last read filled (only those: a read that found nothing changed none, and
// a busy poller makes many of those).
func (b *Backend) resetHeaders() {
	m := &b.rx.m
	for i := range b.rx.count {
		h := &m.hdrs[i]
		h.Len = 0
		h.Hdr.Namelen = sockaddrLen
		h.Hdr.SetControllen(m.oobLen)
		h.Hdr.Flags = 0
	}
	b.rx.count = 0
}

// drain hands out the packets of the messages read last, splitting GRO
// super-datagrams, until pkts is full or the messages are used up.
func (b *Backend) drain(pkts []rocev2.Datagram) int {
	m := &b.rx.m
	n := 0
	for n < len(pkts) && b.rx.next < b.rx.count {
		i := b.rx.next
		h := &m.hdrs[i]
		size := int(h.Len)
		data := b.rx.bufs[i*rxBufSize : i*rxBufSize+size]
		seg := size
		if b.gro {
			if s := groSegment(m.control(i)[:h.Hdr.Controllen]); s > 0 {
				seg = s
			}
		}
		src, scope := getSockaddr(&m.names[i])
		if scope != 0 && scope == b.scope {
			// Only our own zone is known without a lookup; a link-local
			// peer answers on the link we are bound to.
			src = netip.AddrPortFrom(src.Addr().WithZone(b.local.Addr().Zone()), src.Port())
		}
		bad := h.Hdr.Flags&unix.MSG_TRUNC != 0
		for n < len(pkts) {
			end := min(b.rx.off+seg, size)
			d := &pkts[n]
			*d = rocev2.Datagram{Buf: data[b.rx.off:end], Addr: src}
			b.verdict(d, bad, uint16(b.rx.off/seg))
			n++
			b.rx.off = end
			if end >= size {
				b.rx.next++
				b.rx.off = 0
				break
			}
		}
	}
	return n
}

// verdict checks a received packet's ICRC against the flow it arrived in.
//
// Segment i of a GRO datagram most likely left as segment i of a UDP GSO
// send, with IPv4 ID i (protocol-notes §3.5): that ID is checked first, one
// ICRC instead of the full recovery of an unknown ID.
func (b *Backend) verdict(d *rocev2.Datagram, truncated bool, likelyID uint16) {
	d.ICRC = rocev2.ICRCBad
	if truncated {
		return
	}
	fl := rocev2.NewFlow(d.Addr, b.local)
	if b.ipv6 {
		if fl.VerifyICRC(d.Buf) {
			d.ICRC = rocev2.ICRCOK
		}
		return
	}
	if likelyID != 0 {
		fl.IPv4ID = likelyID
		if fl.VerifyICRC(d.Buf) {
			d.ICRC, d.IPv4ID = rocev2.ICRCOK, likelyID
			return
		}
	}
	if id, ok := fl.InferIPv4ID(d.Buf); ok {
		d.ICRC, d.IPv4ID = rocev2.ICRCOK, id
	}
}
