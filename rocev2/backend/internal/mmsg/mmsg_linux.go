// Package mmsg makes the batched system calls goroce's socket backends
// (udp, afpacket) share: sendmmsg and recvmmsg through a syscall.RawConn
// without an allocation per call.
package mmsg

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Call makes one sendmmsg or recvmmsg through a syscall.RawConn. Its
// callback is bound once (a method value allocates), and the socket is
// non-blocking: EAGAIN hands control back to the runtime poller, which
// calls again once the socket is ready, and Close wakes it with an error.
type Call struct {
	trap  uintptr // unix.SYS_SENDMMSG or unix.SYS_RECVMMSG
	hdrs  []unix.Mmsghdr
	n     int
	err   error
	fn    func(fd uintptr) bool
	tryFn func(fd uintptr)
}

// NewCall returns a Call of trap, unix.SYS_SENDMMSG or unix.SYS_RECVMMSG.
func NewCall(trap uintptr) *Call {
	c := &Call{trap: trap}
	c.fn = c.call
	c.tryFn = func(fd uintptr) { c.call(fd) } // EAGAIN leaves n = 0
	return c
}

func (c *Call) call(fd uintptr) bool {
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

// Do runs the call on hdrs (not empty) through rc: sendmmsg waits for the
// socket to be writable, recvmmsg for it to be readable. It returns the
// messages the kernel took or filled.
func (c *Call) Do(rc syscall.RawConn, hdrs []unix.Mmsghdr) (int, error) {
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

// Try runs the call once without waiting: 0 messages when the socket is
// not ready.
func (c *Call) Try(rc syscall.RawConn, hdrs []unix.Mmsghdr) (int, error) {
	c.hdrs = hdrs
	c.n, c.err = 0, nil
	err := rc.Control(c.tryFn)
	c.hdrs = nil
	if err != nil {
		return 0, err
	}
	return c.n, c.err
}
