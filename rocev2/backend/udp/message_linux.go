package udp

import (
	"encoding/binary"
	"net/netip"

	"github.com/goroce/goroce/rocev2"
	"golang.org/x/sys/unix"
)

// rxMessage is one received message as drain hands it out: its bytes, the
// size of the packets it holds, its sender, or why it is dropped whole.
type rxMessage struct {
	data     []byte
	seg      int // > 0 unless drop is set
	src      netip.AddrPort
	ttl, tos uint8
	drop     rocev2.ParseError
}

// message validates message i of the last read. Nothing the kernel wrote
// is taken on trust: a length beyond the buffer, a truncation flag, an
// empty datagram, a GRO segment size of zero or larger than the datagram,
// a control buffer that claims more room than it has, and a sender of the
// wrong address family all end in a drop or a safe default, never in a
// division by zero or a slice out of bounds.
func (b *Backend) message(i int) rxMessage {
	m := &b.rx.m
	h := &m.hdrs[i]
	buf := b.rx.bufs[i*rxBufSize : (i+1)*rxBufSize]
	size := int(h.Len)
	switch {
	case size > len(buf) || size < 0:
		// The kernel never claims more than the iovec holds; a length
		// that does is not something to slice by.
		return rxMessage{drop: rocev2.ErrDatagram}
	case h.Hdr.Flags&unix.MSG_TRUNC != 0:
		// Longer than the receive buffer, which takes any valid RoCEv2
		// packet or GRO super-datagram: the rest is lost.
		return rxMessage{data: buf[:size], drop: rocev2.ErrDatagram}
	case size == 0:
		return rxMessage{data: buf[:0], drop: rocev2.ErrDatagram}
	}
	data := buf[:size]
	src, ok := b.source(&m.names[i], int(h.Hdr.Namelen))
	if !ok {
		return rxMessage{data: data, drop: rocev2.ErrSource}
	}
	ctl := m.control(i)
	if cl := h.Hdr.Controllen; cl < uint64(len(ctl)) {
		ctl = ctl[:cl]
	}
	c := parseControl(ctl)
	seg := size
	// A GRO segment size of 0 or at least the datagram's size means one
	// packet; a size that does not divide the datagram leaves a shorter
	// last packet, as GRO itself does.
	if b.gro && c.seg > 0 && c.seg < size {
		seg = c.seg
	}
	return rxMessage{data: data, seg: seg, src: src, ttl: c.ttl, tos: c.tos}
}

// source decodes the sender of a message from the sockaddr the kernel
// wrote (namelen of its bytes). It accepts only an address of the bound
// address's family that a flow can be built from; anything else (a short
// or unknown sockaddr, an IPv4-mapped sender on an IPv6 socket) is refused,
// since the ICRC cannot be checked against a header no such pair could
// travel in.
func (b *Backend) source(name *[sockaddrLen]byte, namelen int) (netip.AddrPort, bool) {
	if namelen < 2 || namelen > len(name) {
		return netip.AddrPort{}, false
	}
	fam := binary.NativeEndian.Uint16(name[0:])
	switch {
	case !b.ipv6 && fam == unix.AF_INET && namelen >= unix.SizeofSockaddrInet4:
	case b.ipv6 && fam == unix.AF_INET6 && namelen >= unix.SizeofSockaddrInet6:
	default:
		return netip.AddrPort{}, false
	}
	src, scope := getSockaddr(name)
	if a := src.Addr(); !a.IsValid() || a.Is4In6() {
		return netip.AddrPort{}, false
	}
	if scope != 0 && scope == b.scope {
		// Only our own zone is known without a lookup; a link-local peer
		// answers on the link we are bound to.
		src = netip.AddrPortFrom(src.Addr().WithZone(b.local.Addr().Zone()), src.Port())
	}
	return src, true
}
