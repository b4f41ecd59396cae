package cmwire

import (
	"net/netip"
)

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space): a service
// ID is the port space and the port, as rdma_get_service_id forms it.
type PortSpace uint16

const (
	PortSpaceIPoIB PortSpace = 0x0002
	PortSpaceTCP   PortSpace = 0x0106 // RC
	PortSpaceUDP   PortSpace = 0x0111 // UD
	PortSpaceIB    PortSpace = 0x013F // RC or UD, chosen by the QP type
)

func (p PortSpace) String() string {
	switch p {
	case PortSpaceIPoIB:
		return "IPoIB"
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIB:
		return "IB"
	}
	return "PS?"
}

// ServiceID returns the service ID rdma_cm uses for port of space ps.
func ServiceID(ps PortSpace, port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

// SplitServiceID returns the port space and port of an rdma_cm service
// ID; ok is false when the ID is not of rdma_cm's IP form (the top 32
// bits are zero for it: RDMA_IB_IP_PS_MASK).
func SplitServiceID(sid uint64) (ps PortSpace, port uint16, ok bool) {
	return PortSpace(sid >> 16), uint16(sid), sid>>32 == 0
}

// CMAVersion is the only rdma_cm header version (CMA_VERSION).
const CMAVersion = 0x00

// CMAHeaderLen is the length of the rdma_cm header at the start of the
// private data of a REQ or SIDR_REQ on an IP address (not AF_IB).
const CMAHeaderLen = 36

// CMAHeader is the header rdma_cm puts at the start of a REQ's or
// SIDR_REQ's private data (struct cma_hdr): the IP addresses and the
// source port of the connection, which a RoCE CM has no other way to
// learn. The rest of the private data is the application's.
type CMAHeader struct {
	Version   uint8      `json:"cma_version"`
	IPVersion uint8      `json:"ip_version"` // 4 or 6: the top nibble of the byte
	Port      uint16     `json:"port"`       // the source (active side's) port
	Src       netip.Addr `json:"src"`
	Dst       netip.Addr `json:"dst"`
}

// ParseCMAHeader reads the rdma_cm header at the start of pd. It checks
// the length and that the IP version is 4 or 6 (ErrVersion otherwise);
// like Linux it leaves the version byte to the caller, which rejects
// anything but CMAVersion.
func ParseCMAHeader(pd []byte) (CMAHeader, error) {
	if len(pd) < CMAHeaderLen {
		return CMAHeader{}, ErrShort
	}
	h := CMAHeader{Version: pd[0], IPVersion: pd[1] >> 4, Port: uint16(pd[2])<<8 | uint16(pd[3])}
	switch h.IPVersion {
	case 4:
		h.Src = netip.AddrFrom4([4]byte(pd[16:20]))
		h.Dst = netip.AddrFrom4([4]byte(pd[32:36]))
	case 6:
		h.Src = netip.AddrFrom16([16]byte(pd[4:20]))
		h.Dst = netip.AddrFrom16([16]byte(pd[20:36]))
	default:
		return h, ErrVersion
	}
	return h, nil
}

// Put writes h at the start of pd (at least CMAHeaderLen bytes) as
// cma_format_hdr does: IPv4 addresses in the last 4 bytes of each
// 16-byte field, the low nibble of the IP version byte zero.
func (h *CMAHeader) Put(pd []byte) {
	b := pd[:CMAHeaderLen]
	clear(b)
	b[0], b[1] = h.Version, h.IPVersion<<4
	b[2], b[3] = byte(h.Port>>8), byte(h.Port)
	if h.IPVersion == 4 {
		s, d := h.Src.Unmap().As4(), h.Dst.Unmap().As4()
		copy(b[16:20], s[:])
		copy(b[32:36], d[:])
		return
	}
	s, d := h.Src.As16(), h.Dst.As16()
	copy(b[4:20], s[:])
	copy(b[20:36], d[:])
}

// NewCMAHeader returns the header for a connection from src to dst.
func NewCMAHeader(src, dst netip.AddrPort) CMAHeader {
	v := uint8(6)
	if src.Addr().Unmap().Is4() {
		v = 4
	}
	return CMAHeader{Version: CMAVersion, IPVersion: v, Port: src.Port(), Src: src.Addr().Unmap(), Dst: dst.Addr().Unmap()}
}

// GIDFromAddr returns the RoCEv2 GID of an IP address (IPv4-mapped for
// IPv4), as rdma_ip2gid does.
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// Addr returns the IP address of a RoCEv2 GID (IPv4 for an IPv4-mapped one).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

func (g GID) String() string { return netip.AddrFrom16(g).String() }

// MarshalText prints the GID as an IPv6 address.
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }
