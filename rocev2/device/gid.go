package device

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
)

// GID is a 16-byte global identifier in network order.
type GID [16]byte

// GIDType mirrors ibv_gid_type (goroce, like rxe, has only RoCE v2 GIDs).
type GIDType uint8

const GIDTypeRoCEv2 GIDType = 2

func (t GIDType) String() string { return "RoCE v2" }

// GIDEntry is one entry of the port's GID table.
type GIDEntry struct {
	Index int
	GID   GID
	Type  GIDType
}

// GIDFromAddr returns the RoCEv2 GID of an IP address: IPv4-mapped for
// IPv4, the address itself for IPv6.
func GIDFromAddr(a netip.Addr) GID {
	return GID(a.As16()) // As16 maps IPv4 to ::ffff:a.b.c.d
}

// Addr returns the IP address the GID stands for (IPv4 when mapped).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsZero reports whether the GID is all zero (no GRH, unusable on RoCE).
func (g GID) IsZero() bool { return g == GID{} }

// String prints the GID as an address (fe80::…, ::ffff:a.b.c.d).
func (g GID) String() string {
	a := netip.AddrFrom16(g)
	return a.String()
}

// Hex returns the GID as 32 lowercase hex digits, the wire form of the
// rc_pingpong out-of-band exchange.
func (g GID) Hex() string { return fmt.Sprintf("%x", g[:]) }

// linkLocalGID derives fe80::/64 plus an EUI-64 from a MAC, as rxe does for
// GID index 0.
func linkLocalGID(mac [6]byte) GID {
	var g GID
	g[0], g[1] = 0xfe, 0x80
	copy(g[8:11], mac[0:3])
	g[8] ^= 0x02 // flip the universal/local bit
	g[11], g[12] = 0xff, 0xfe
	copy(g[13:16], mac[3:6])
	return g
}

// guidFromMAC derives the node GUID from a MAC the same way.
func guidFromMAC(mac [6]byte) uint64 {
	g := linkLocalGID(mac)
	return binary.BigEndian.Uint64(g[8:])
}

// randomMAC returns a random locally administered unicast MAC, as the
// kernel gives a veth (eth_hw_addr_random): a device without an interface
// of its own has no MAC to take, and one derived from its address would be
// known to anyone (SMC-R's peer ID is made of it).
func randomMAC() [6]byte {
	var m [6]byte
	_, _ = rand.Read(m[:]) // crypto/rand.Read never fails on Linux
	m[0] = m[0]&^0x01 | 0x02
	return m
}
