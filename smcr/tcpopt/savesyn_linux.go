package tcpopt

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SaveSYN sets TCP_SAVE_SYN on a listening socket, so that the kernel
// keeps each client's SYN for SYNHasOption. Use it as
// net.ListenConfig.Control, with SetMultipathTCP(false). It needs no
// privilege, but it only lets a listener see the option: nothing is
// echoed, so a Linux client falls back to TCP; a client that knows by
// configuration that its peer speaks SMC can go ahead.
func SaveSYN(network, address string, c syscall.RawConn) error {
	if err := tcpNetwork(network); err != nil {
		return err
	}
	var inner error
	err := c.Control(func(fd uintptr) {
		if inner = checkTCP(int(fd)); inner == nil {
			inner = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_SAVE_SYN, 1)
		}
	})
	if err != nil {
		return err
	}
	if inner != nil {
		return fmt.Errorf("tcpopt: TCP_SAVE_SYN: %w", inner)
	}
	return nil
}

// SYNHasOption reports whether the client's SYN of a connection accepted
// on a listener with TCP_SAVE_SYN (SaveSYN, or a Signaller's) carried the
// option. The kernel hands the saved SYN out once: a second call, or one
// after PeerSignalled, wraps ErrNoSavedSYN. A SYN whose headers do not
// hold together wraps ErrMalformedSYN.
func SYNHasOption(c *net.TCPConn) (bool, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return false, err
	}
	var syn []byte
	var inner error
	if err := rc.Control(func(fd uintptr) { syn, inner = savedSYN(int(fd)) }); err != nil {
		return false, err
	}
	if inner != nil {
		return false, inner
	}
	return parseSYN(syn)
}

// maxSavedSYN bounds the buffer for a saved SYN: IPv6 with extension
// headers and a full TCP header stays far below it.
const maxSavedSYN = 64 << 10

// savedSYN reads getsockopt(TCP_SAVED_SYN): the IP and TCP headers of the
// SYN. x/sys/unix has no getsockopt for a plain byte buffer, hence the
// raw system call. When the buffer is too small the kernel fails with
// EINVAL and writes the length it needs; that is tried once more.
func savedSYN(fd int) ([]byte, error) {
	buf := make([]byte, 256)
	for range 2 {
		n := uint32(len(buf))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_SAVED_SYN,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case e == unix.EINVAL && int(n) > len(buf) && n <= maxSavedSYN:
			buf = make([]byte, n)
			continue
		case e != 0:
			return nil, fmt.Errorf("tcpopt: getsockopt(TCP_SAVED_SYN): %w", e)
		case n == 0:
			return nil, ErrNoSavedSYN
		case int(n) > len(buf):
			return nil, fmt.Errorf("%w: kernel reported %d bytes for a %d-byte buffer", ErrMalformedSYN, n, len(buf))
		}
		return buf[:n], nil
	}
	return nil, fmt.Errorf("tcpopt: getsockopt(TCP_SAVED_SYN): the saved SYN kept growing")
}

// tcpNetwork refuses networks other than TCP (the Control functions see
// "tcp4" or "tcp6"; the others for completeness).
func tcpNetwork(network string) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
		return nil
	}
	return fmt.Errorf("tcpopt: %q is not TCP: only TCP handshakes carry the option", network)
}

// checkTCP refuses sockets that are not plain TCP, MPTCP above all: Go
// creates its sockets with IPPROTO_MPTCP when MPTCP is on (the default for
// net.ListenConfig since Go 1.24), and the kernel then runs the sock_ops
// callbacks and saves the SYN on the subflow, not on this socket.
func checkTCP(fd int) error {
	proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	if err != nil {
		return fmt.Errorf("tcpopt: SO_PROTOCOL: %w", err)
	}
	switch proto {
	case unix.IPPROTO_TCP:
		return nil
	case unix.IPPROTO_MPTCP:
		return ErrMPTCP
	}
	return fmt.Errorf("tcpopt: socket protocol %d is not TCP", proto)
}
