package rdmacm

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// Address and route resolution on RoCEv2, as rdma_cm does it without a
// subnet administrator: the GIDs are the IP addresses, the path is built
// locally (cma_resolve_iboe_route).

// portKey is a bound rdma_cm port of a port space.
type portKey struct {
	ps   cmwire.PortSpace
	port uint16
}

// Ephemeral ports come from Linux's default ip_local_port_range.
const ephemeralLow, ephemeralHigh = 32768, 60999

// bindPort takes port of space ps (0: a free ephemeral one); shared is
// for a connection's source port, which several may not share. c.mu held.
func (c *CM) bindPort(ps cmwire.PortSpace, port uint16) (uint16, error) {
	if port == 0 {
		for range 4096 {
			p := uint16(ephemeralLow + rand.IntN(ephemeralHigh-ephemeralLow+1))
			if c.ports[portKey{ps, p}] == 0 {
				port = p
				break
			}
		}
		if port == 0 {
			return 0, fmt.Errorf("rdmacm: no free %v port in %d..%d", ps, ephemeralLow, ephemeralHigh)
		}
	} else if c.ports[portKey{ps, port}] != 0 {
		return 0, fmt.Errorf("rdmacm: %v port %d is in use (EADDRINUSE)", ps, port)
	}
	c.ports[portKey{ps, port}]++
	return port, nil
}

func (c *CM) unbindPort(ps cmwire.PortSpace, port uint16) {
	k := portKey{ps, port}
	if c.ports[k]--; c.ports[k] <= 0 {
		delete(c.ports, k)
	}
}

// localAddr checks that a is the device's address (or unspecified, then
// the device's) and returns it.
func (c *CM) localAddr(a netip.Addr) (netip.Addr, error) {
	own := c.dev.LocalAddr().Addr().Unmap()
	a = a.Unmap()
	if !a.IsValid() || a.IsUnspecified() {
		return own, nil
	}
	if a.WithZone("") != own.WithZone("") {
		return netip.Addr{}, fmt.Errorf("rdmacm: %v is not the device's address (%v): no RDMA device there (EADDRNOTAVAIL)", a, own)
	}
	return own, nil
}

// flowLabel is cma_get_roce_udp_flow_label: rdma_cm's flow label of a
// connection from source port sport to destination port dport, which
// also gives the connection's UDP source port.
func flowLabel(sport, dport uint16) uint32 { return (uint32(sport)*31 + uint32(dport)) & 0xFFFFF }

// route builds the path of a connection from src to dst as rdma_cm does on
// RoCE: permissive LIDs, hop limit 64 (the route's), traffic class 0, the
// port's MTU, the packet life time of the configuration.
func (c *CM) route(src, dst netip.AddrPort) (path cmwire.Path, mtu rocev2.MTU) {
	plt := c.cfg.PacketLifeTime
	path = cmwire.Path{
		LocalLID: 0xFFFF, RemoteLID: 0xFFFF,
		LocalGID: cmwire.GIDFromAddr(src.Addr()), RemoteGID: cmwire.GIDFromAddr(dst.Addr()),
		FlowLabel: flowLabel(src.Port(), dst.Port()), HopLimit: 64,
		LocalACKTimeout: ackTimeout(device.LocalCAAckDelay, plt),
	}
	return path, c.dev.Port().ActiveMTU
}

// sgidIndex returns the index of g in the device's GID table (1, the
// address's GID, if absent).
func (c *CM) sgidIndex(g cmwire.GID) uint8 {
	for _, e := range c.dev.GIDs() {
		if cmwire.GID(e.GID) == g {
			return uint8(e.Index)
		}
	}
	return 1
}

// randomPSN is rdma_cm's seq_num: a random 24-bit starting PSN, as the
// CM's IDs keep it.
func randomPSN() uint32 { return uint32(qp.RandomPSN()) }

// validPeer is the part of Linux's validate_net_dev a lone device can
// check: a peer address that is a unicast address. (Linux also refuses
// loopback addresses, which no RoCE device has; goroce's devices run on
// them in tests.)
func validPeer(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() &&
		!(a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}))
}
