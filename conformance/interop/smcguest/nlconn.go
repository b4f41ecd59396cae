//go:build linux

package main

// A netlink socket: one request at a time, its replies collected until the
// kernel's ACK, error or end of dump, bounded in time and in count.

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

const (
	nlRecvBuf = 256 << 10 // a dump datagram is at most a page or two; room to spare
	nlMaxMsgs = 100000    // a dump longer than this is a broken kernel or a loop
)

// nlConn is a netlink socket of one protocol (NETLINK_GENERIC,
// NETLINK_SOCK_DIAG).
type nlConn struct {
	fd      int
	seq     uint32
	pid     uint32
	timeout time.Duration
}

func dialNetlink(proto int, timeout time.Duration) (*nlConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %s", errnoText(err))
	}
	c := &nlConn{fd: fd, seq: uint32(time.Now().UnixNano()), timeout: timeout}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		c.Close()
		return nil, fmt.Errorf("netlink bind: %s", errnoText(err))
	}
	if sa, err := unix.Getsockname(fd); err == nil {
		if nl, ok := sa.(*unix.SockaddrNetlink); ok {
			c.pid = nl.Pid
		}
	}
	// Error texts from the kernel where it has them; errors without the
	// request echoed back. Older kernels lack these: not needed.
	unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		c.Close()
		return nil, fmt.Errorf("netlink SO_RCVTIMEO: %s", errnoText(err))
	}
	return c, nil
}

func (c *nlConn) Close() error { return unix.Close(c.fd) }

// do sends a request that expects no data back (NLM_F_ACK) and returns
// the kernel's verdict.
func (c *nlConn) do(typ uint16, payload []byte) error {
	_, err := c.exchange(typ, nlmFRequest|nlmFAck, payload)
	return err
}

// dump sends a dump request and returns every message of the dump.
func (c *nlConn) dump(typ uint16, payload []byte) ([]nlMsg, error) {
	return c.exchange(typ, nlmFRequest|nlmFDump, payload)
}

// query sends a request whose answer is one message (and an ACK).
func (c *nlConn) query(typ uint16, payload []byte) ([]nlMsg, error) {
	return c.exchange(typ, nlmFRequest|nlmFAck, payload)
}

// exchange sends one request and reads replies with its sequence number
// until an ACK, an error or NLMSG_DONE.
func (c *nlConn) exchange(typ, flags uint16, payload []byte) ([]nlMsg, error) {
	c.seq++
	req := appendMsg(nil, typ, flags, c.seq, 0, payload)
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("netlink send: %s", errnoText(err))
	}
	deadline := time.Now().Add(c.timeout)
	buf := make([]byte, nlRecvBuf)
	var out []nlMsg
	for {
		if time.Now().After(deadline) {
			return out, fmt.Errorf("netlink: no complete answer in %v", c.timeout)
		}
		n, _, rflags, _, err := unix.Recvmsg(c.fd, buf, nil, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN || err == unix.EWOULDBLOCK:
			return out, fmt.Errorf("netlink: no answer in %v", c.timeout)
		case err != nil:
			return out, fmt.Errorf("netlink receive: %s", errnoText(err))
		case rflags&unix.MSG_TRUNC != 0:
			return out, fmt.Errorf("netlink: a reply did not fit in %d bytes", len(buf))
		}
		msgs, err := parseMsgs(buf[:n])
		if err != nil {
			return out, err
		}
		for _, m := range msgs {
			if m.seq != c.seq || (m.pid != 0 && m.pid != c.pid) {
				continue // an answer to an earlier request, or not ours
			}
			switch m.typ {
			case nlmsgError:
				e, err := parseError(m)
				if err != nil {
					return out, err
				}
				if e.errno != 0 {
					return out, kernelError(e)
				}
				return out, nil // the ACK
			case nlmsgDone:
				// A dump's end; it may carry an error too.
				if len(m.data) >= 4 {
					if e, _ := parseError(nlMsg{data: m.data[:4]}); e.errno != 0 {
						return out, kernelError(e)
					}
				}
				return out, nil
			}
			out = append(out, nlMsg{typ: m.typ, flags: m.flags, seq: m.seq, pid: m.pid, data: append([]byte(nil), m.data...)})
			if len(out) > nlMaxMsgs {
				return out, fmt.Errorf("netlink: more than %d messages in one answer", nlMaxMsgs)
			}
			if flags&nlmFDump == 0 && flags&nlmFAck == 0 && m.flags&nlmFMulti == 0 {
				return out, nil
			}
		}
	}
}

// kernelError turns a netlink error into a Go error naming the errno.
func kernelError(e nlError) error {
	return &kernelErr{errno: unix.Errno(-e.errno), text: e.text}
}

// kernelErr is an error the kernel answered with.
type kernelErr struct {
	errno unix.Errno
	text  string
}

func (e *kernelErr) Error() string {
	s := errnoText(e.errno)
	if e.text != "" {
		s += ": " + e.text
	}
	return s
}

func (e *kernelErr) Unwrap() error { return e.errno }

// errnoText names an errno: "ECONNRESET (connection reset by peer)". An
// error that wraps one (but is not itself one) prints as it is: its own
// message names the errno wherever named() made it.
func errnoText(err error) string {
	en, ok := err.(unix.Errno)
	if !ok {
		return err.Error()
	}
	name := unix.ErrnoName(en)
	if name == "" {
		name = fmt.Sprintf("errno %d", int(en))
	}
	return fmt.Sprintf("%s (%s)", name, en.Error())
}
