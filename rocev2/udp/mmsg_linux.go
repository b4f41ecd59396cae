package udp

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"unsafe"

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

// mmsgCall makes one sendmmsg or recvmmsg through a syscall.RawConn. Its
// callback is bound once (a method value allocates), and the socket is
// non-blocking: EAGAIN hands control back to the runtime poller, which calls
// again once the socket is ready, and Close wakes it with an error.
type mmsgCall struct {
	trap uintptr // unix.SYS_SENDMMSG or unix.SYS_RECVMMSG
	hdrs []unix.Mmsghdr
	n    int
	err  error
	fn   func(fd uintptr) bool
}

func newMmsgCall(trap uintptr) *mmsgCall {
	c := &mmsgCall{trap: trap}
	c.fn = c.call
	return c
}

func (c *mmsgCall) call(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(c.trap, fd, uintptr(unsafe.Pointer(&c.hdrs[0])), uintptr(len(c.hdrs)), 0, 0, 0)
		switch e {
		case 0:
			c.n, c.err = int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			c.n, c.err = 0, e
		}
		return true
	}
}

// do runs the call on hdrs (not empty) through rc: sendmmsg waits for the
// socket to be writable, recvmmsg for it to be readable.
func (c *mmsgCall) do(rc syscall.RawConn, hdrs []unix.Mmsghdr) (int, error) {
	c.hdrs = hdrs
	var err error
	if c.trap == unix.SYS_SENDMMSG {
		err = rc.Write(c.fn)
	} else {
		err = rc.Read(c.fn)
	}
	c.hdrs = nil
	if err != nil {
		return 0, err
	}
	return c.n, c.err
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
