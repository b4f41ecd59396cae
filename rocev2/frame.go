package rocev2

import (
	"encoding/binary"
	"net/netip"
)

// Frame is an Ethernet or IP frame split into the parts RoCEv2 cares about.
// All slices point into the frame.
type Frame struct {
	IP      []byte // IPv4 header (with options) or IPv6 fixed header
	UDP     []byte // UDP header
	Payload []byte // UDP payload: BTH through ICRC
}

// Src returns the IP source address.
func (f *Frame) Src() netip.Addr { return ipAddr(f.IP, true) }

// Dst returns the IP destination address.
func (f *Frame) Dst() netip.Addr { return ipAddr(f.IP, false) }

// SrcPort returns the UDP source port.
func (f *Frame) SrcPort() uint16 { return binary.BigEndian.Uint16(f.UDP[0:]) }

// DstPort returns the UDP destination port.
func (f *Frame) DstPort() uint16 { return binary.BigEndian.Uint16(f.UDP[2:]) }

func ipAddr(ip []byte, src bool) netip.Addr {
	if ip[0]>>4 == 4 {
		o := 16
		if src {
			o = 12
		}
		return netip.AddrFrom4([4]byte(ip[o : o+4]))
	}
	o := 24
	if src {
		o = 8
	}
	return netip.AddrFrom16([16]byte(ip[o : o+16]))
}

// ParseEthernetFrame splits an Ethernet frame (with up to two VLAN tags)
// carrying IPv4 or IPv6 UDP to port. Frames that are not UDP to that port
// return ErrNotRoCE; inconsistent headers or lengths return ErrFrameTruncated.
func ParseEthernetFrame(frame []byte, port uint16, f *Frame) error {
	if len(frame) < EthernetHeaderLen {
		return ErrFrameTruncated
	}
	off := 12
	for tags := 0; ; tags++ {
		if len(frame) < off+2 {
			return ErrFrameTruncated
		}
		t := binary.BigEndian.Uint16(frame[off:])
		if (t == ethTypeVLAN || t == ethTypeQinQ) && tags < 2 {
			off += VLANTagLen
			continue
		}
		if t != ethTypeIPv4 && t != ethTypeIPv6 {
			return ErrNotRoCE
		}
		break
	}
	return ParseIPPacket(frame[off+2:], port, f)
}

// ParseIPPacket splits an IPv4 or IPv6 packet carrying UDP to port. Trailing
// bytes after the IP total length (Ethernet padding) are ignored.
func ParseIPPacket(pkt []byte, port uint16, f *Frame) error {
	*f = Frame{}
	if len(pkt) < 1 {
		return ErrFrameTruncated
	}
	var ip, rest []byte
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < IPv4HeaderLen {
			return ErrFrameTruncated
		}
		ihl := int(pkt[0]&0x0F) * 4
		total := int(binary.BigEndian.Uint16(pkt[2:]))
		if ihl < IPv4HeaderLen || total < ihl || total > len(pkt) {
			return ErrFrameTruncated
		}
		if pkt[9] != protoUDP {
			return ErrNotRoCE
		}
		if binary.BigEndian.Uint16(pkt[6:])&0x3FFF != 0 { // MF or fragment offset
			return ErrNotRoCE
		}
		ip, rest = pkt[:ihl], pkt[ihl:total]
	case 6:
		if len(pkt) < IPv6HeaderLen {
			return ErrFrameTruncated
		}
		plen := int(binary.BigEndian.Uint16(pkt[4:]))
		if IPv6HeaderLen+plen > len(pkt) {
			return ErrFrameTruncated
		}
		if pkt[6] != protoUDP { // RoCEv2 carries no IPv6 extension headers
			return ErrNotRoCE
		}
		ip, rest = pkt[:IPv6HeaderLen], pkt[IPv6HeaderLen:IPv6HeaderLen+plen]
	default:
		return ErrNotRoCE
	}
	if len(rest) < UDPHeaderLen {
		return ErrFrameTruncated
	}
	if binary.BigEndian.Uint16(rest[2:]) != port {
		return ErrNotRoCE
	}
	ulen := int(binary.BigEndian.Uint16(rest[4:]))
	if ulen < UDPHeaderLen || ulen > len(rest) {
		return ErrFrameTruncated
	}
	f.IP, f.UDP, f.Payload = ip, rest[:UDPHeaderLen], rest[UDPHeaderLen:ulen]
	return nil
}

// ICRC computes the ICRC the frame's payload should carry.
func (f *Frame) ICRC() (uint32, bool) {
	if len(f.Payload) < BTHLen+ICRCLen {
		return 0, false
	}
	return ICRCFromHeaders(f.IP, f.UDP, f.Payload[:len(f.Payload)-ICRCLen])
}

// VerifyICRC reports whether the frame's ICRC trailer matches its headers and
// payload; ok is false when the frame is too short to carry one.
func (f *Frame) VerifyICRC() (match, ok bool) {
	c, ok := f.ICRC()
	if !ok {
		return false, false
	}
	return c == binary.LittleEndian.Uint32(f.Payload[len(f.Payload)-ICRCLen:]), true
}
