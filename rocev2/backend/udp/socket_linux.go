package udp

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// sockopts is what configure asks of the socket and what it got.
type sockopts struct {
	ipv6   bool
	buffer int  // SO_RCVBUF/SO_SNDBUF, <0: leave alone
	gso    bool // wanted on entry, supported on return
	gro    bool // wanted on entry, enabled on return
}

// configure sets the socket options the data path relies on.
//
//   - IP_MTU_DISCOVER=IP_PMTUDISC_DO: DF on every packet and no local
//     fragmentation, as RoCE requires; it is also what makes the kernel send
//     IPv4 ID 0 from an unconnected socket, the ID we seal ICRCs for.
//   - UDP_NO_CHECK6_RX: RoCE peers (rxe, RNICs) send IPv6 with a zero UDP
//     checksum, which Linux drops unless the socket opts in.
//   - UDP_NO_CHECK6_TX: send zero checksums too, as rxe does, but only
//     without GSO: the kernel refuses UDP_SEGMENT on a socket with
//     no_check_tx (EINVAL). The checksum is masked out of the ICRC, so
//     either form interoperates.
//   - UDP_GRO, and UDP_SEGMENT probed with getsockopt.
//   - IP_RECVTTL and IP_RECVTOS (IPV6_RECVHOPLIMIT, IPV6_RECVTCLASS): the
//     IP header fields a UD receive reports in front of its payload, as
//     rxe copies the whole header there (best effort: without them those
//     fields read 0).
//
// The buffer sizes are best effort: the *BUFFORCE options need
// CAP_NET_ADMIN, and without it the kernel silently caps SO_RCVBUF.
func configure(rc syscall.RawConn, o *sockopts) error {
	var err error
	cerr := rc.Control(func(fd uintptr) {
		s := int(fd)
		if o.buffer > 0 {
			setBuffer(s, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, o.buffer)
			setBuffer(s, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, o.buffer)
		}
		if o.gso {
			_, e := unix.GetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
			o.gso = e == nil
		}
		if o.ipv6 {
			if err = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO); err != nil {
				return
			}
			if err = unix.SetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1); err != nil {
				return
			}
			if !o.gso {
				if err = unix.SetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_TX, 1); err != nil {
					return
				}
			}
		} else if err = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); err != nil {
			return
		}
		if o.gro {
			o.gro = unix.SetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
		}
		if o.ipv6 {
			_ = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1)
			_ = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		} else {
			_ = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_RECVTTL, 1)
			_ = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

func setBuffer(fd, force, plain, n int) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, n) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, n)
	}
}

// groSafe reports whether the running kernel's UDP GRO can be trusted.
// Before Linux 5.12 a UDP_GRO socket could be handed coalesced packets it
// must not get; wireguard-go turns GRO off there too (commit c92064f).
func groSafe() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	major, minor, ok := kernelVersion(unix.ByteSliceToString(u.Release[:]))
	return ok && (major > 5 || major == 5 && minor >= 12)
}

// kernelVersion parses the "major.minor" prefix of a kernel release string
// such as "6.18.44-fc-v669".
func kernelVersion(release string) (major, minor int, ok bool) {
	maj, rest, found := strings.Cut(release, ".")
	if !found {
		return 0, 0, false
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end >= 0 {
		rest = rest[:end]
	}
	var e1, e2 error
	major, e1 = strconv.Atoi(maj)
	minor, e2 = strconv.Atoi(rest)
	return major, minor, e1 == nil && e2 == nil
}
