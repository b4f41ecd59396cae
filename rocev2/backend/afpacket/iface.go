package afpacket

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// link is what the backend needs of its interface.
type link struct {
	name  string
	index int
	mac   [6]byte
	mtu   int
	addr  netip.Addr // the device's address on it (zoned if link-local IPv6)
}

// findLink looks up the interface and the device's address on it.
func findLink(name string, want netip.Addr) (link, error) {
	if name == "" {
		return link{}, errors.New("afpacket: no interface given (Config.Interface, -i IFACE)")
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return link{}, fmt.Errorf("afpacket: interface %q: %w (ip link lists the interfaces)", name, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return link{}, fmt.Errorf("afpacket: %s has no Ethernet address (a loopback or tunnel device?): the AF_PACKET backend needs an Ethernet interface; use the UDP backend (-backend udp) there", name)
	}
	if ifi.Flags&net.FlagUp == 0 {
		return link{}, fmt.Errorf("afpacket: %s is down (ip link set %s up)", name, name)
	}
	l := link{name: name, index: ifi.Index, mac: [6]byte(ifi.HardwareAddr), mtu: ifi.MTU}
	addrs, err := ifi.Addrs()
	if err != nil {
		return link{}, fmt.Errorf("afpacket: addresses of %s: %w", name, err)
	}
	want = want.Unmap().WithZone("")
	var have []string
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
		have = append(have, ip.String())
		if want.IsValid() && ip != want {
			continue
		}
		if ip.Is6() && ip.IsLinkLocalUnicast() {
			ip = ip.WithZone(name)
		}
		l.addr = ip
		return l, nil
	}
	if want.IsValid() {
		return link{}, fmt.Errorf("afpacket: %v is not an address of %s (it has %v): the host must own the device's address to answer ARP for it (ip addr add %v/24 dev %s)", want, name, have, want, name)
	}
	return link{}, fmt.Errorf("afpacket: %s has no IP address: give it one (ip addr add ADDR/PREFIX dev %s)", name, name)
}
