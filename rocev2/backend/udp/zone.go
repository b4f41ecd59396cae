package udp

import (
	"net"
	"strconv"
)

// zoneIndex resolves an IPv6 zone (an interface name or index) to an
// interface index, 0 if unknown.
func zoneIndex(zone string) uint32 {
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n)
	}
	return 0
}
