package afpacket

import (
	"os"
	"strconv"
	"strings"
)

// systemHopLimit is the IPv4 TTL or IPv6 hop limit the kernel gives
// unicast packets leaving iface: net.ipv4.ip_default_ttl, or the
// interface's net.ipv6.conf.IFACE.hop_limit (of the calling process's
// network namespace), or defaultHopLimit when neither can be read.
//
// The device uses it for every packet, whatever the address vector asks:
// for unicast RoCE, Linux's RDMA core replaces the vector's hop limit with
// the route's when it resolves the destination's MAC (for a QP's path and
// for an address handle alike), so that rxe sends 64 where rc_pingpong
// asks for 1. A frame that left with the vector's 1 would not pass a
// router.
func systemHopLimit(iface string, ipv6 bool) uint8 {
	path := "/proc/sys/net/ipv4/ip_default_ttl"
	if ipv6 {
		path = "/proc/sys/net/ipv6/conf/" + iface + "/hop_limit"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return defaultHopLimit
	}
	return parseHopLimit(string(b))
}

// parseHopLimit reads a hop limit sysctl's value: 1 to 255, else
// defaultHopLimit.
func parseHopLimit(s string) uint8 {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 255 {
		return defaultHopLimit
	}
	return uint8(n)
}
