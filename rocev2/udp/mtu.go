package udp

import (
	"net"
	"net/netip"
)

// defaultMTU is assumed when no interface owns the address (Ethernet).
const defaultMTU = 1500

// linkMTU returns the MTU of the interface that owns addr. A loopback
// interface owns its whole prefix (127.0.0.2 is on lo although only
// 127.0.0.1/8 is configured), any other interface only its exact addresses.
func linkMTU(addr netip.Addr) int {
	addr = addr.WithZone("")
	ifs, err := net.Interfaces()
	if err != nil {
		return defaultMTU
	}
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip == addr {
				return ifi.MTU
			}
			bits, _ := ipn.Mask.Size()
			if ifi.Flags&net.FlagLoopback != 0 && ip.Is4() == addr.Is4() {
				if p, err := ip.Prefix(bits); err == nil && p.Contains(addr) {
					return ifi.MTU
				}
			}
		}
	}
	return defaultMTU
}
