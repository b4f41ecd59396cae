package udp

import (
	"net"
	"net/netip"
)

// defaultMTU is assumed when no interface owns the address (Ethernet).
const defaultMTU = 1500

// linkMTU returns the MTU of the interface that owns addr (see InterfaceOf),
// or the Ethernet default when none does.
func linkMTU(addr netip.Addr) int {
	if ifi, ok := InterfaceOf(addr); ok {
		return ifi.MTU
	}
	return defaultMTU
}

// InterfaceOf returns the network interface that owns addr. A loopback
// interface owns its whole prefix (127.0.0.2 is on lo although only
// 127.0.0.1/8 is configured), any other interface only its exact addresses.
func InterfaceOf(addr netip.Addr) (net.Interface, bool) {
	addr = addr.WithZone("").Unmap()
	ifs, err := net.Interfaces()
	if err != nil {
		return net.Interface{}, false
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
				return ifi, true
			}
			bits, _ := ipn.Mask.Size()
			if ifi.Flags&net.FlagLoopback != 0 && ip.Is4() == addr.Is4() {
				if p, err := ip.Prefix(bits); err == nil && p.Contains(addr) {
					return ifi, true
				}
			}
		}
	}
	return net.Interface{}, false
}
