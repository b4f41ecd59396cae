package udp

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"
)

// sockaddrLen is the room for a sockaddr_in6, the larger of the two families.
const sockaddrLen = unix.SizeofSockaddrInet6

// mmsgs is a preallocated sendmmsg/recvmmsg vector: the message headers and
// the iovecs, socket addresses and control buffers they point to. Everything
// is allocated once, so the kernel reads and writes the same Go memory on
// every call and nothing escapes per packet.
type mmsgs struct {
	hdrs   []unix.Mmsghdr
	iovs   []unix.Iovec
	names  [][sockaddrLen]byte
	oob    []byte
	oobLen int // control buffer bytes per message, a multiple of 8
}

func newMmsgs(msgs, iovs, oobLen int) mmsgs {
	oobLen = (oobLen + 7) &^ 7 // keeps every control buffer cmsghdr-aligned
	return mmsgs{
		hdrs:   make([]unix.Mmsghdr, msgs),
		iovs:   make([]unix.Iovec, iovs),
		names:  make([][sockaddrLen]byte, msgs),
		oob:    make([]byte, msgs*oobLen),
		oobLen: oobLen,
	}
}

// control returns message i's control buffer.
func (m *mmsgs) control(i int) []byte {
	return m.oob[i*m.oobLen : (i+1)*m.oobLen]
}

// putSockaddr encodes ap as a sockaddr_in (v6 false) or sockaddr_in6 and
// returns its length.
func putSockaddr(b *[sockaddrLen]byte, ap netip.AddrPort, v6 bool, scope uint32) uint32 {
	*b = [sockaddrLen]byte{}
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	if !v6 {
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		a := ap.Addr().As4()
		copy(b[4:8], a[:])
		return unix.SizeofSockaddrInet4
	}
	binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
	a := ap.Addr().As16()
	copy(b[8:24], a[:])
	binary.NativeEndian.PutUint32(b[24:], scope)
	return unix.SizeofSockaddrInet6
}

// getSockaddr decodes a sockaddr_in or sockaddr_in6 written by the kernel.
func getSockaddr(b *[sockaddrLen]byte) (ap netip.AddrPort, scope uint32) {
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b[0:]) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), 0
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), binary.NativeEndian.Uint32(b[24:])
	}
	return netip.AddrPort{}, 0
}
