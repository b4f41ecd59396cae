package afpacket

import (
	"encoding/binary"
	"net/netip"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// Frame layout constants.
const (
	ethHeaderLen = rocev2.EthernetHeaderLen
	ethTypeIPv4  = 0x0800
	ethTypeIPv6  = 0x86DD
	ethTypeVLAN  = 0x8100
	ethTypeQinQ  = 0x88A8
	protoUDP     = 17

	// maxHeaderLen is the room for the headers the backend writes in
	// front of a packet: Ethernet, IPv6, UDP.
	maxHeaderLen = ethHeaderLen + rocev2.IPv6HeaderLen + rocev2.UDPHeaderLen

	// defaultHopLimit is the IPv4 TTL / IPv6 hop limit when the system's
	// cannot be read (Linux's default).
	defaultHopLimit = 64
)

// IPv6 next headers that are extension headers RoCEv2 never uses: the
// filter lets them through so that the receive path counts them.
const (
	nextHopByHop = 0
	nextRouting  = 43
	nextFragment = 44
	nextDestOpts = 60
	ipv4FragMask = 0x3FFF // MF flag and fragment offset
)

// header is what the send path writes in front of one packet.
type header struct {
	srcMAC, dstMAC [6]byte
	src, dst       netip.Addr // both IPv4 or both IPv6
	srcPort        uint16
	dstPort        uint16
	ipv4ID         uint16
	hopLimit       uint8
	tclass         uint8
	flowLabel      uint32
}

// put writes the Ethernet, IP and UDP headers for a UDP payload of
// roceLen bytes (BTH through ICRC) into b (maxHeaderLen bytes at least)
// and returns their length. IPv4 has DF and a computed header checksum;
// the UDP checksum is 0, as rxe and RNICs send it (the ICRC covers the
// payload; IPv6 receivers of RoCE accept a zero checksum).
func (h *header) put(b []byte, roceLen int) int {
	copy(b[0:6], h.dstMAC[:])
	copy(b[6:12], h.srcMAC[:])
	udpLen := rocev2.UDPHeaderLen + roceLen
	n := ethHeaderLen
	if h.src.Is4() {
		binary.BigEndian.PutUint16(b[12:], ethTypeIPv4)
		ip := b[n : n+rocev2.IPv4HeaderLen]
		ip[0] = 0x45
		ip[1] = h.tclass
		binary.BigEndian.PutUint16(ip[2:], uint16(rocev2.IPv4HeaderLen+udpLen))
		binary.BigEndian.PutUint16(ip[4:], h.ipv4ID)
		binary.BigEndian.PutUint16(ip[6:], rocev2.IPv4DontFragment)
		ip[8] = h.hopLimit
		ip[9] = protoUDP
		ip[10], ip[11] = 0, 0
		s, d := h.src.As4(), h.dst.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		binary.BigEndian.PutUint16(ip[10:], rocev2.IPv4Checksum(ip))
		n += rocev2.IPv4HeaderLen
	} else {
		binary.BigEndian.PutUint16(b[12:], ethTypeIPv6)
		ip := b[n : n+rocev2.IPv6HeaderLen]
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(h.tclass)<<20|h.flowLabel&0xFFFFF)
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = protoUDP
		ip[7] = h.hopLimit
		s, d := h.src.As16(), h.dst.As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
		n += rocev2.IPv6HeaderLen
	}
	u := b[n : n+rocev2.UDPHeaderLen]
	binary.BigEndian.PutUint16(u[0:], h.srcPort)
	binary.BigEndian.PutUint16(u[2:], h.dstPort)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	u[6], u[7] = 0, 0
	return n + rocev2.UDPHeaderLen
}

// Packet types of sockaddr_ll (linux/if_packet.h), and the tpacket status
// bits of PACKET_AUXDATA a received frame is judged by. They are Linux's
// ABI, spelled out here so that the frame checks build and are tested on
// every system.
const (
	packetHost = 0 // PACKET_HOST: to us

	statusCsumNotReady = 1 << 3 // TP_STATUS_CSUMNOTREADY: a local sender left the checksum to offload
	statusVLANValid    = 1 << 4 // TP_STATUS_VLAN_VALID: the kernel took a VLAN tag off
	statusCsumValid    = 1 << 7 // TP_STATUS_CSUM_VALID: the device checked the checksum
)

// virtio_net_hdr's GSO types and flags (linux/virtio_net.h): with
// PACKET_VNET_HDR the kernel says whether a frame is a GSO super-frame. A
// virtual link (veth, a VM's tap) hands a UDP GSO send over unsegmented:
// one frame with the headers once and the segments' payloads back to back,
// each segment sealed for the headers segmentation would give it.
const (
	vnetHdrLen     = 10
	gsoNone        = 0
	gsoUDPL4       = 5
	gsoECN         = 0x80
	vnetNeedsCsum  = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM: checksum left to offload
	vnetDataValid  = 2 // VIRTIO_NET_HDR_F_DATA_VALID: checksum checked
	maxGSOSegments = 64
)

// rxFrame is one received frame as the kernel reported it.
type rxFrame struct {
	data    []byte
	pktType uint8  // sockaddr_ll's sll_pkttype
	status  uint32 // PACKET_AUXDATA's tp_status (0 without one)
	vnet    [vnetHdrLen]byte
}

// rxMessage is a validated frame, to be handed out as one packet or, for a
// GSO super-frame, one per segment.
type rxMessage struct {
	drop    rocev2.ParseError
	ip, udp []byte // the frame's headers
	payload []byte // every segment's
	seg     int    // bytes per segment (the last may be shorter); > 0 unless drop
	src     netip.AddrPort
}

// segments returns how many packets m holds.
func (m *rxMessage) segments() int {
	if m.drop != 0 {
		return 1
	}
	return max(1, (len(m.payload)+m.seg-1)/m.seg)
}

// rxCheck is what the receive path judges frames by: the device's own
// address and the largest frame its link's MTU lets through.
type rxCheck struct {
	local    netip.Addr // zone kept: a link-local sender gets it
	maxFrame int        // Ethernet header plus the MTU
}

// message validates a received frame. Every field of it is untrusted: any
// length or header that lies, any encapsulation RoCEv2 does not use (VLAN
// tags, IPv4 options, IPv6 extension headers, fragments), a wrong IPv4
// header checksum or a wrong non-zero UDP checksum, a frame (or a GSO
// segment) longer than the link's MTU allows, or one not sent to this
// device ends in a drop, never in a slice out of bounds.
func (c *rxCheck) message(f rxFrame) rxMessage {
	fr := f.data
	gsoType, gsoSize := f.vnet[1]&^gsoECN, int(binary.NativeEndian.Uint16(f.vnet[4:]))
	switch {
	case f.status&statusVLANValid != 0:
		return rxMessage{drop: rocev2.ErrEncap} // a tagged frame belongs to a VLAN device, not to us
	case f.pktType != packetHost:
		return rxMessage{drop: rocev2.ErrNotRoCE} // broadcast, multicast, another host's (promiscuous)
	case gsoType != gsoNone && gsoType != gsoUDPL4:
		return rxMessage{drop: rocev2.ErrEncap}
	case gsoType == gsoNone && len(fr) > c.maxFrame:
		return rxMessage{drop: rocev2.ErrDatagram} // longer than the link's MTU lets through
	case len(fr) < ethHeaderLen:
		return rxMessage{drop: rocev2.ErrFrameTruncated}
	}
	var ip, rest []byte
	var src netip.Addr
	switch binary.BigEndian.Uint16(fr[12:]) {
	case ethTypeIPv4:
		if !c.local.Is4() {
			return rxMessage{drop: rocev2.ErrSource}
		}
		p := fr[ethHeaderLen:]
		if len(p) < rocev2.IPv4HeaderLen {
			return rxMessage{drop: rocev2.ErrFrameTruncated}
		}
		ihl := int(p[0]&0x0F) * 4
		total := int(binary.BigEndian.Uint16(p[2:]))
		switch {
		case p[0]>>4 != 4 || ihl < rocev2.IPv4HeaderLen || total < ihl || total > len(p):
			return rxMessage{drop: rocev2.ErrFrameTruncated}
		case rocev2.IPv4Checksum(p[:ihl]) != 0:
			return rxMessage{drop: rocev2.ErrChecksum}
		case p[9] != protoUDP || netip.AddrFrom4([4]byte(p[16:20])) != c.local:
			return rxMessage{drop: rocev2.ErrNotRoCE}
		case ihl != rocev2.IPv4HeaderLen || binary.BigEndian.Uint16(p[6:])&ipv4FragMask != 0:
			// Options: rxe's ICRC assumes a 20-byte header, so no
			// RoCE peer sends them. Fragments: RoCE sets DF.
			return rxMessage{drop: rocev2.ErrEncap}
		}
		ip, rest = p[:ihl], p[ihl:total]
		src = netip.AddrFrom4([4]byte(p[12:16]))
	case ethTypeIPv6:
		if !c.local.Is6() {
			return rxMessage{drop: rocev2.ErrSource}
		}
		p := fr[ethHeaderLen:]
		if len(p) < rocev2.IPv6HeaderLen {
			return rxMessage{drop: rocev2.ErrFrameTruncated}
		}
		plen := int(binary.BigEndian.Uint16(p[4:]))
		switch {
		case p[0]>>4 != 6 || rocev2.IPv6HeaderLen+plen > len(p):
			return rxMessage{drop: rocev2.ErrFrameTruncated}
		case netip.AddrFrom16([16]byte(p[24:40])) != c.local.WithZone(""):
			return rxMessage{drop: rocev2.ErrNotRoCE}
		}
		switch p[6] {
		case protoUDP:
		case nextHopByHop, nextRouting, nextFragment, nextDestOpts:
			return rxMessage{drop: rocev2.ErrEncap}
		default:
			return rxMessage{drop: rocev2.ErrNotRoCE}
		}
		ip, rest = p[:rocev2.IPv6HeaderLen], p[rocev2.IPv6HeaderLen:rocev2.IPv6HeaderLen+plen]
		src = netip.AddrFrom16([16]byte(p[8:24]))
		if src.Is4In6() {
			return rxMessage{drop: rocev2.ErrSource}
		}
		if src.IsLinkLocalUnicast() {
			src = src.WithZone(c.local.Zone())
		}
	case ethTypeVLAN, ethTypeQinQ:
		return rxMessage{drop: rocev2.ErrEncap}
	default:
		return rxMessage{drop: rocev2.ErrNotRoCE}
	}
	if !src.IsValid() || src.IsUnspecified() || src.IsMulticast() || src.IsLoopback() || src == c.local.WithZone(src.Zone()) {
		return rxMessage{drop: rocev2.ErrSource}
	}
	if len(rest) < rocev2.UDPHeaderLen {
		return rxMessage{drop: rocev2.ErrFrameTruncated}
	}
	udp := rest[:rocev2.UDPHeaderLen]
	if binary.BigEndian.Uint16(udp[2:]) != rocev2.UDPPort {
		return rxMessage{drop: rocev2.ErrNotRoCE}
	}
	if ulen := int(binary.BigEndian.Uint16(udp[4:])); ulen != len(rest) {
		// The UDP length must fill the IP payload exactly: a shorter one
		// hides bytes, a longer one claims bytes that are not there.
		return rxMessage{drop: rocev2.ErrFrameTruncated}
	}
	payload := rest[rocev2.UDPHeaderLen:]
	seg := len(payload)
	if gsoType == gsoUDPL4 && gsoSize > 0 && gsoSize < len(payload) {
		if ethHeaderLen+len(ip)+rocev2.UDPHeaderLen+gsoSize > c.maxFrame || len(payload) > maxGSOSegments*gsoSize {
			return rxMessage{drop: rocev2.ErrDatagram}
		}
		seg = gsoSize
	} else if ethHeaderLen+len(ip)+len(rest) > c.maxFrame {
		return rxMessage{drop: rocev2.ErrDatagram}
	}
	unchecked := f.status&(statusCsumNotReady|statusCsumValid) != 0 || f.vnet[0]&(vnetNeedsCsum|vnetDataValid) != 0
	if sum := binary.BigEndian.Uint16(udp[6:]); sum != 0 && !unchecked && udpChecksum(ip, rest) != 0 {
		return rxMessage{drop: rocev2.ErrChecksum}
	}
	if seg == 0 {
		seg = 1 // an empty payload: one (short) packet
	}
	return rxMessage{ip: ip, udp: udp, payload: payload, seg: seg,
		src: netip.AddrPortFrom(src, binary.BigEndian.Uint16(udp[0:]))}
}

// packet fills d with packet k of m: its bytes, its sender, and its ICRC
// verdict over the headers it travelled in (for segment k of a GSO
// super-frame, the ones segmentation gives it: the lengths of its own
// size and, over IPv4, the ID plus k).
func (c *rxCheck) packet(m *rxMessage, k int, d *backend.Incoming) {
	if m.drop != 0 {
		*d = backend.Incoming{Drop: m.drop}
		return
	}
	off := min(k*m.seg, len(m.payload))
	pkt := m.payload[off:min(off+m.seg, len(m.payload))]
	*d = backend.Incoming{Buf: pkt, Src: m.src, ICRC: backend.ICRCBad}
	ip, udp := m.ip, m.udp
	var ipb [rocev2.IPv6HeaderLen]byte
	var udpb [rocev2.UDPHeaderLen]byte
	if len(pkt) != len(m.payload) { // a segment: its own headers
		n := copy(ipb[:], ip)
		ip = ipb[:n]
		copy(udpb[:], udp)
		udp = udpb[:]
		binary.BigEndian.PutUint16(udp[4:], uint16(rocev2.UDPHeaderLen+len(pkt)))
		if ip[0]>>4 == 4 {
			binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+rocev2.UDPHeaderLen+len(pkt)))
			binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(ip[4:])+uint16(k))
		} else {
			binary.BigEndian.PutUint16(ip[4:], uint16(rocev2.UDPHeaderLen+len(pkt)))
		}
	}
	// What a UD receive reports of the IP header (its GRH area).
	if ip[0]>>4 == 4 {
		d.IPv4ID = binary.BigEndian.Uint16(ip[4:])
		d.TOS, d.TTL = ip[1], ip[8]
	} else {
		d.TOS, d.TTL = ip[0]<<4|ip[1]>>4, ip[7]
	}
	if len(pkt) < rocev2.BTHLen+rocev2.ICRCLen {
		return // the device's parser counts it as short
	}
	crc, ok := rocev2.ICRCFromHeaders(ip, udp, pkt[:len(pkt)-rocev2.ICRCLen])
	if ok && crc == binary.LittleEndian.Uint32(pkt[len(pkt)-rocev2.ICRCLen:]) {
		d.ICRC = backend.ICRCVerified
	}
}

// check validates a frame holding one packet (no GSO) into d.
func (c *rxCheck) check(f rxFrame, d *backend.Incoming) {
	m := c.message(f)
	c.packet(&m, 0, d)
}

// udpChecksum returns the Internet checksum over the pseudo-header of ip
// and the UDP header and payload in udp (whose checksum field stays in):
// 0 when the checksum is right.
func udpChecksum(ip, udp []byte) uint16 {
	var sum uint64
	if ip[0]>>4 == 4 {
		sum += uint64(binary.BigEndian.Uint32(ip[12:])) + uint64(binary.BigEndian.Uint32(ip[16:]))
	} else {
		for i := 8; i < 40; i += 4 {
			sum += uint64(binary.BigEndian.Uint32(ip[i:]))
		}
	}
	sum += protoUDP + uint64(len(udp))
	b := udp
	for len(b) >= 8 {
		sum += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// seal computes the ICRC of pkt (BTH through the ICRC trailer) over the
// headers in hdr, as put wrote them, and stores it in the trailer.
func seal(hdr, pkt []byte) {
	ipLen := len(hdr) - ethHeaderLen - rocev2.UDPHeaderLen
	ip, udp := hdr[ethHeaderLen:ethHeaderLen+ipLen], hdr[ethHeaderLen+ipLen:]
	crc, _ := rocev2.ICRCFromHeaders(ip, udp, pkt[:len(pkt)-rocev2.ICRCLen])
	rocev2.PutICRC(pkt, crc)
}
