package afpacket

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgCall makes one sendmmsg or recvmmsg through a syscall.RawConn. Its
// callback is bound once (a method value allocates), and the socket is
// non-blocking: EAGAIN hands control back to the runtime poller, which calls
// again once the socket is ready, and Close wakes it with an error. (The
// UDP backend has its own; the two stay apart so that each package stands
// alone.)
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

// peek reports whether a frame is waiting, without taking it.
func peek(fd uintptr) bool {
	var one [1]byte
	for {
		_, _, err := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&one[0])), 1,
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		return true // a frame (err 0), or an error the next receive reports
	}
}
