// Package backendflag is the backend choice the tools share: -backend
// udp|afpacket|shm|auto and -i IFACE, and opening what they name.
//
//	-backend udp       goroce's default: a UDP socket on the address and port
//	-backend afpacket  whole Ethernet frames on an interface (needs CAP_NET_RAW)
//	-backend shm       the shared-memory link to goroce processes of this
//	                   host (Linux), and nothing else
//	-backend auto      the shared-memory link where the peer offers it, the
//	                   UDP socket otherwise (a kernel rxe, another host)
//	-i IFACE           the interface; the address defaults to its first one
//	-rx mmsg|ring      the afpacket backend's receive path (roce-perf): recvmmsg
//	                   (default) or a TPACKET_V3 ring
//
// The default is udp, although auto is faster between two goroce processes:
// with udp every packet is on the wire, where tcpdump on lo, a kernel rxe
// peer and the interop harness see it; with shm or auto the packets
// between goroce processes never touch a socket (a -capture of the device
// still records them, framed as UDP would carry them).
//
// The afpacket backend needs the interface (or an address the host has on
// one, from which the interface follows); the others need an address,
// which -i can supply.
package backendflag

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/afpacket"
	"github.com/goroce/goroce/rocev2/backend/shm"
	"github.com/goroce/goroce/rocev2/backend/udp"
)

// The backends.
const (
	UDP      = "udp"
	AFPacket = "afpacket"
	Shm      = "shm"
	Auto     = "auto"
)

// Usage is the flags' help text, for tools that print their own.
const Usage = `-backend udp|afpacket|shm|auto
                        the packet backend: udp (default: a UDP socket on port 4791),
                        afpacket (whole Ethernet frames on -i's interface; needs CAP_NET_RAW),
                        shm (shared memory to goroce processes of this host), or auto
                        (shared memory where the peer offers it, else UDP)
-i IFACE                the network interface; the address defaults to its first one`

// FlagHelp is the help text of a tool's -backend flag.
const FlagHelp = "packet `backend`: udp (a UDP socket, the default), afpacket (whole Ethernet frames on -i's interface, as rxe; needs CAP_NET_RAW), shm (shared memory to goroce processes of this host) or auto (shared memory where the peer offers it, UDP otherwise)"

// Spec is a tool's backend choice.
type Spec struct {
	Kind  string     // UDP (""), AFPacket, Shm or Auto
	Iface string     // -i
	Addr  netip.Addr // -d, if given
	Port  uint16     // the UDP backend's port (0: 4791)
	Rx    string     // -rx: the afpacket backend's receive mode, mmsg ("") or ring
}

// Check reports a choice that cannot work, in words that say what to type.
func (s *Spec) Check() error {
	if _, err := afpacket.ParseReceiveMode(s.Rx); err != nil {
		return fmt.Errorf("-rx %q: use mmsg (recvmmsg, the default) or ring (a TPACKET_V3 ring)", s.Rx)
	}
	switch s.Kind {
	case "", UDP, Shm, Auto:
		if s.Rx != "" && s.Rx != "mmsg" {
			return fmt.Errorf("-rx %s is a receive mode of -backend afpacket; the %s backend has none", s.Rx, s.kind())
		}
	case AFPacket:
		if s.Iface == "" && !s.Addr.IsValid() {
			return errors.New("-backend afpacket needs the interface: -i IFACE (e.g. -i eth0), or -d with an address of one")
		}
		if s.Port != 0 && s.Port != rocev2.UDPPort {
			return fmt.Errorf("-backend afpacket sends and receives on UDP port %d only (no -udp-port %d)", rocev2.UDPPort, s.Port)
		}
	default:
		return fmt.Errorf("-backend %q: use udp, afpacket, shm or auto", s.Kind)
	}
	return nil
}

func (s *Spec) kind() string {
	if s.Kind == "" {
		return UDP
	}
	return s.Kind
}

// IsAFPacket reports whether the choice is the AF_PACKET backend.
func (s *Spec) IsAFPacket() bool { return s.Kind == AFPacket }

// LocalAddr returns the address the device will have: -d's, else the first
// address of -i's interface. ok is false when neither is given.
func (s *Spec) LocalAddr() (netip.Addr, bool, error) {
	if s.Addr.IsValid() {
		return s.Addr, true, nil
	}
	if s.Iface == "" {
		return netip.Addr{}, false, nil
	}
	a, err := FirstAddr(s.Iface)
	return a, err == nil, err
}

// FirstAddr returns the first address of an interface (a link-local IPv6
// one zoned with the interface).
func FirstAddr(iface string) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("-i %s: %w (ip link lists the interfaces)", iface, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("-i %s: %w", iface, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				ip = ip.Unmap()
				if ip.Is6() && ip.IsLinkLocalUnicast() {
					ip = ip.WithZone(iface)
				}
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("-i %s: the interface has no IP address (ip addr add ADDR/PREFIX dev %s)", iface, iface)
}

// ifaceOf returns the interface that has addr.
func ifaceOf(addr netip.Addr) (string, error) {
	ifi, ok := udp.InterfaceOf(addr)
	if !ok {
		return "", fmt.Errorf("no interface has the address %v (-d): give -i IFACE", addr)
	}
	return ifi.Name, nil
}

// Open opens the chosen backend on addr (LocalAddr's, or the caller's
// choice when it has none) and returns it with a description for logs.
func Open(s Spec, addr netip.Addr) (backend.Backend, string, error) {
	if err := s.Check(); err != nil {
		return nil, "", err
	}
	if !s.IsAFPacket() {
		port := s.Port
		if port == 0 {
			port = rocev2.UDPPort
		}
		ap := netip.AddrPortFrom(addr, port)
		switch s.Kind {
		case Shm:
			b, err := shm.Open(shm.Config{Addr: ap})
			if err != nil {
				return nil, "", err
			}
			return b, "shm " + b.LocalAddr().String(), nil
		case Auto:
			u, err := udp.Open(udp.Config{Addr: ap})
			if err != nil {
				return nil, "", err
			}
			b, err := shm.Open(shm.Config{Fallback: u}) // owns u, closed on failure too
			if err != nil {
				return nil, "", err
			}
			return b, "auto (shm, else udp) " + b.LocalAddr().String(), nil
		}
		b, err := udp.Open(udp.Config{Addr: ap})
		if err != nil {
			return nil, "", err
		}
		return b, "udp " + b.LocalAddr().String(), nil
	}
	iface := s.Iface
	if iface == "" {
		var err error
		if iface, err = ifaceOf(addr); err != nil {
			return nil, "", err
		}
	}
	mode, _ := afpacket.ParseReceiveMode(s.Rx) // Check refused any other
	b, err := afpacket.Open(afpacket.Config{Interface: iface, Addr: addr, Receive: mode})
	if err != nil {
		return nil, "", err
	}
	return b, "afpacket " + iface + " " + b.LocalAddr().Addr().String(), nil
}
