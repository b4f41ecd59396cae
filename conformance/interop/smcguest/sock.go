//go:build linux

package main

// Stream sockets (AF_SMC or, with -tcp, AF_INET) with deadlines: the fd is
// non-blocking and every wait is a poll(2) bounded by the caller's
// deadline, so that no step can hang and every error names its errno.

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	afSMC     = 43 // AF_SMC
	smcProto4 = 0  // SMCPROTO_SMC: SMC over IPv4
	pollSlice = 200 * time.Millisecond
)

var (
	errTimeout = errors.New("timed out")
	errStopped = errors.New("stopped: the other direction failed")
)

// sock is one non-blocking stream socket.
type sock struct {
	fd      int
	smc     bool
	stopped atomic.Bool // set: waits give up (the reader failed, the writer need not wait on)
}

// newSock makes a socket: AF_SMC (proto 0, IPv4) or plain TCP.
func newSock(tcp bool) (*sock, error) {
	family, proto := afSMC, smcProto4
	if tcp {
		family, proto = unix.AF_INET, unix.IPPROTO_TCP
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		if !tcp && (err == unix.EAFNOSUPPORT || err == unix.EPROTONOSUPPORT) {
			return nil, fmt.Errorf("AF_SMC socket: %s: load the smc module (modprobe smc)", errnoText(err))
		}
		return nil, fmt.Errorf("socket: %s", errnoText(err))
	}
	return &sock{fd: fd, smc: !tcp}, nil
}

func (s *sock) Close() error { return unix.Close(s.fd) }

// wait polls for ev until the deadline.
func (s *sock) wait(ev int16, deadline time.Time) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return errTimeout
		}
		if s.stopped.Load() {
			return errStopped
		}
		// Short slices: a stop is noticed within pollSlice.
		ms := int(min(left, pollSlice) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(s.fd), Events: ev}}
		n, err := unix.Poll(fds, max(ms, 1))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %s", errnoText(err))
		}
		if n > 0 {
			return nil // ready, or an error the next call reports
		}
	}
}

func sockaddr(ap netip.AddrPort) (*unix.SockaddrInet4, error) {
	if !ap.Addr().Is4() {
		return nil, fmt.Errorf("%s: only IPv4 addresses", ap)
	}
	return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, nil
}

// connect connects to ap (for AF_SMC: including the SMC handshake, or the
// fallback to TCP) by the deadline.
func (s *sock) connect(ap netip.AddrPort, deadline time.Time) error {
	sa, err := sockaddr(ap)
	if err != nil {
		return err
	}
	err = unix.Connect(s.fd, sa)
	if err == nil {
		return nil
	}
	if err != unix.EINPROGRESS && err != unix.EALREADY && err != unix.EINTR {
		return fmt.Errorf("connect %s: %s", ap, errnoText(err))
	}
	if err := s.wait(unix.POLLOUT, deadline); err != nil {
		return fmt.Errorf("connect %s: %w", ap, err)
	}
	soErr, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return fmt.Errorf("connect %s: SO_ERROR: %s", ap, errnoText(err))
	}
	if soErr != 0 {
		return fmt.Errorf("connect %s: %s", ap, errnoText(unix.Errno(soErr)))
	}
	return nil
}

// listen binds to ap and listens.
func (s *sock) listen(ap netip.AddrPort, backlog int) error {
	sa, err := sockaddr(ap)
	if err != nil {
		return err
	}
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fmt.Errorf("SO_REUSEADDR: %s", errnoText(err))
	}
	if err := unix.Bind(s.fd, sa); err != nil {
		return fmt.Errorf("bind %s: %s", ap, errnoText(err))
	}
	if err := unix.Listen(s.fd, backlog); err != nil {
		return fmt.Errorf("listen %s: %s", ap, errnoText(err))
	}
	return nil
}

// accept waits for a connection until the deadline.
func (s *sock) accept(deadline time.Time) (*sock, netip.AddrPort, error) {
	for {
		fd, sa, err := unix.Accept4(s.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case err == nil:
			var peer netip.AddrPort
			if in4, ok := sa.(*unix.SockaddrInet4); ok {
				peer = netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port))
			}
			return &sock{fd: fd, smc: s.smc}, peer, nil
		case err == unix.EAGAIN || err == unix.EINTR:
			if err := s.wait(unix.POLLIN, deadline); err != nil {
				return nil, netip.AddrPort{}, fmt.Errorf("accept: %w", err)
			}
		default:
			return nil, netip.AddrPort{}, fmt.Errorf("accept: %s", errnoText(err))
		}
	}
}

// read reads what is there (at least one byte), or 0 at EOF.
func (s *sock) read(p []byte, deadline time.Time) (int, error) {
	for {
		n, err := unix.Read(s.fd, p)
		switch {
		case err == nil:
			return n, nil
		case err == unix.EAGAIN || err == unix.EINTR:
			if err := s.wait(unix.POLLIN, deadline); err != nil {
				return 0, err
			}
		default:
			return 0, named(err)
		}
	}
}

// writeAll writes all of p.
func (s *sock) writeAll(p []byte, deadline time.Time) error {
	for len(p) > 0 {
		n, err := unix.Write(s.fd, p)
		switch {
		case err == nil:
			p = p[n:]
		case err == unix.EAGAIN || err == unix.EINTR:
			if err := s.wait(unix.POLLOUT, deadline); err != nil {
				return err
			}
		default:
			return named(err)
		}
	}
	return nil
}

// shutWrite is shutdown(SHUT_WR): the peer reads EOF.
func (s *sock) shutWrite() error {
	if err := unix.Shutdown(s.fd, unix.SHUT_WR); err != nil {
		return fmt.Errorf("shutdown(SHUT_WR): %s", errnoText(err))
	}
	return nil
}

// queued returns the bytes waiting in the receive queue (SIOCINQ).
func (s *sock) queued() (int, error) {
	n, err := unix.IoctlGetInt(s.fd, unix.SIOCINQ)
	if err != nil {
		return 0, fmt.Errorf("SIOCINQ: %s", errnoText(err))
	}
	return n, nil
}

// waitQueued waits until at least n bytes are queued for reading, or some
// are and no more have come for settle (a TCP receive queue of many small
// segments closes the window before it holds n bytes: their memory, not
// their bytes, fills the buffer), or the deadline passes; it returns how
// many are. Some unread data is what makes a close an abort.
func (s *sock) waitQueued(n int, deadline time.Time) (int, error) {
	const settle = time.Second
	last, since := -1, time.Now()
	for {
		q, err := s.queued()
		if err != nil || q >= n {
			return q, err
		}
		if q != last {
			last, since = q, time.Now()
		} else if q > 0 && time.Since(since) >= settle {
			return q, nil
		}
		if time.Now().After(deadline) {
			return q, errTimeout
		}
		// poll says readable as soon as one byte is, and there is no event
		// for "n bytes": look again a little later (bounded by deadline).
		time.Sleep(5 * time.Millisecond)
	}
}

// inode is the socket's inode number (what sock_diag reports).
func (s *sock) inode() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// ioErr names a read or write error: the errno, or the time-out.
func ioErr(err error) string {
	if errors.Is(err, errTimeout) {
		return "timed out"
	}
	return errnoText(err)
}

// namedErrno is an errno whose message starts with its name
// ("ECONNRESET (connection reset by peer)"); errors.Is still finds it.
type namedErrno struct{ errno unix.Errno }

func (e namedErrno) Error() string { return errnoText(e.errno) }
func (e namedErrno) Unwrap() error { return e.errno }

// named wraps a bare errno so that its name shows wherever it is printed.
func named(err error) error {
	if en, ok := err.(unix.Errno); ok {
		return namedErrno{en}
	}
	return err
}
