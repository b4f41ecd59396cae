package rocev2

import (
	"encoding/binary"
	"net/netip"
)

// Header sizes of the encapsulation below the BTH.
const (
	EthernetHeaderLen = 14
	VLANTagLen        = 4
	IPv4HeaderLen     = 20
	IPv6HeaderLen     = 40
	UDPHeaderLen      = 8

	// MaxEncapLen is the longest encapsulation below a BTH this package
	// writes: Ethernet, IPv6 and UDP headers (a capture's frame header,
	// for instance, fits in it).
	MaxEncapLen = EthernetHeaderLen + IPv6HeaderLen + UDPHeaderLen

	// UDPPort is the IANA port of RoCEv2 ("roce").
	UDPPort = 4791

	// IPv4DontFragment is the IPv4 flags/fragment-offset value RoCE uses.
	IPv4DontFragment = 0x4000

	ethTypeIPv4 = 0x0800
	ethTypeIPv6 = 0x86DD
	ethTypeVLAN = 0x8100
	ethTypeQinQ = 0x88A8
	protoUDP    = 17
)

// Flow is the IP and UDP encapsulation of RoCEv2 packets between two
// endpoints: what the ICRC covers below the BTH, and what a raw backend or a
// capture writes in front of it. Src and Dst must both be IPv4 or both IPv6.
type Flow struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	// IPv4ID and IPv4Flags are the IPv4 identification and flags/fragment
	// offset. Both are covered by the ICRC. An unconnected Linux UDP socket
	// with IP_PMTUDISC_DO sends ID 0 with DF.
	IPv4ID    uint16
	IPv4Flags uint16
	TOS       uint8  // IPv4 TOS / IPv6 traffic class (not covered)
	TTL       uint8  // IPv4 TTL / IPv6 hop limit (not covered)
	FlowLabel uint32 // IPv6 flow label (not covered)
	SrcMAC    [6]byte
	DstMAC    [6]byte
}

// NewFlow returns the flow from src to dst as goroce's UDP backend sends it:
// DF set, IPv4 ID 0, TTL 64.
func NewFlow(src, dst netip.AddrPort) Flow {
	return Flow{
		Src: src.Addr().Unmap(), Dst: dst.Addr().Unmap(),
		SrcPort: src.Port(), DstPort: dst.Port(),
		IPv4Flags: IPv4DontFragment, TTL: 64,
	}
}

// IsIPv6 reports whether the flow is carried over IPv6.
func (f *Flow) IsIPv6() bool { return f.Src.Is6() && !f.Src.Is4In6() }

// IPHeaderLen returns the size of the flow's IP header.
func (f *Flow) IPHeaderLen() int {
	if f.IsIPv6() {
		return IPv6HeaderLen
	}
	return IPv4HeaderLen
}

// EncodeIPUDP writes the IP and UDP headers for a UDP payload of roceLen
// bytes (BTH through ICRC) into b, which must hold IPHeaderLen()+UDPHeaderLen
// bytes, and returns the number of bytes written. The IPv4 header checksum is
// computed; the UDP checksum is 0, as rxe and RNICs send it.
func (f *Flow) EncodeIPUDP(b []byte, roceLen int) int { return f.encodeIPUDP(b, roceLen, false) }

// encodeIPUDP is EncodeIPUDP; forICRC writes the headers as the ICRC sees
// them instead: the variant fields (IPv4 TOS, TTL and checksum; IPv6 class,
// flow label and hop limit; the UDP checksum) set to 1s, so the IPv4
// checksum, masked anyway, is not computed.
func (f *Flow) encodeIPUDP(b []byte, roceLen int, forICRC bool) int {
	udpLen := UDPHeaderLen + roceLen
	tos, ttl, label, udpSum := f.TOS, f.TTL, f.FlowLabel&0xFFFFF, uint16(0)
	if forICRC {
		tos, ttl, label, udpSum = 0xff, 0xff, 0xFFFFF, 0xffff
	}
	var n int
	if f.IsIPv6() {
		h := b[:IPv6HeaderLen]
		binary.BigEndian.PutUint32(h[0:], 6<<28|uint32(tos)<<20|label)
		binary.BigEndian.PutUint16(h[4:], uint16(udpLen))
		h[6] = protoUDP
		h[7] = ttl
		src, dst := as16(f.Src), as16(f.Dst)
		copy(h[8:24], src[:])
		copy(h[24:40], dst[:])
		n = IPv6HeaderLen
	} else {
		h := b[:IPv4HeaderLen]
		h[0] = 0x45
		h[1] = tos
		binary.BigEndian.PutUint16(h[2:], uint16(IPv4HeaderLen+udpLen))
		binary.BigEndian.PutUint16(h[4:], f.IPv4ID)
		binary.BigEndian.PutUint16(h[6:], f.IPv4Flags)
		h[8] = ttl
		h[9] = protoUDP
		src, dst := as4(f.Src), as4(f.Dst)
		copy(h[12:16], src[:])
		copy(h[16:20], dst[:])
		if forICRC {
			h[10], h[11] = 0xff, 0xff
		} else {
			h[10], h[11] = 0, 0
			binary.BigEndian.PutUint16(h[10:], IPv4Checksum(h))
		}
		n = IPv4HeaderLen
	}
	u := b[n : n+UDPHeaderLen]
	binary.BigEndian.PutUint16(u[0:], f.SrcPort)
	binary.BigEndian.PutUint16(u[2:], f.DstPort)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	binary.BigEndian.PutUint16(u[6:], udpSum)
	return n + UDPHeaderLen
}

// as4 and as16 are netip.Addr.As4 and As16 without the panic: a flow whose
// addresses do not fit its IP version (an invalid address, an IPv6 address
// in an IPv4 flow) encodes zeros, so its ICRC simply does not match. A
// receive path must never crash on a sender address it did not expect.
func as4(a netip.Addr) [4]byte {
	if a.Is4() || a.Is4In6() {
		return a.Unmap().As4()
	}
	return [4]byte{}
}

func as16(a netip.Addr) [16]byte {
	if !a.IsValid() {
		return [16]byte{}
	}
	return a.As16()
}

// EncodeEthernet writes an Ethernet header for the flow into b (14 bytes).
func (f *Flow) EncodeEthernet(b []byte) int {
	copy(b[0:6], f.DstMAC[:])
	copy(b[6:12], f.SrcMAC[:])
	t := uint16(ethTypeIPv4)
	if f.IsIPv6() {
		t = ethTypeIPv6
	}
	binary.BigEndian.PutUint16(b[12:], t)
	return EthernetHeaderLen
}

// ICRC computes the ICRC of pkt (BTH through pad, without the trailer) as
// carried in this flow.
func (f *Flow) ICRC(pkt []byte) uint32 {
	var hdr [IPv6HeaderLen + UDPHeaderLen]byte
	n := f.encodeIPUDP(hdr[:], len(pkt)+ICRCLen, true)
	return icrcOver(hdr[:n], pkt)
}

// SealICRC computes the ICRC of pkt (BTH through the 4-byte trailer) and
// stores it in the trailer.
func (f *Flow) SealICRC(pkt []byte) {
	PutICRC(pkt, f.ICRC(pkt[:len(pkt)-ICRCLen]))
}

// VerifyICRC reports whether the trailer of pkt (BTH through ICRC) matches.
func (f *Flow) VerifyICRC(pkt []byte) bool {
	if len(pkt) < BTHLen+ICRCLen {
		return false
	}
	return f.ICRC(pkt[:len(pkt)-ICRCLen]) == binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:])
}

// IPv4Checksum returns the Internet checksum of an IPv4 header whose checksum
// field is zero (or the value to verify: a correct header sums to 0).
func IPv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
