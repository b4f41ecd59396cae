package udp

import (
	"net"

	"golang.org/x/sys/unix"
)

// configurePortable gives the portable backend's socket what the ICRC and
// RoCE peers need on Linux: DF and so IPv4 ID 0 on every datagram, and
// IPv6 datagrams with a zero UDP checksum accepted (see configure).
func configurePortable(conn *net.UDPConn, ipv6 bool) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		s := int(fd)
		if ipv6 {
			if serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO); serr == nil {
				serr = unix.SetsockoptInt(s, unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1)
			}
			return
		}
		serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
	})
	if cerr != nil {
		return cerr
	}
	return serr
}
