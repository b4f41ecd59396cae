package pcap

import (
	"errors"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/goroce/goroce/rocev2"
)

// VerifyICRC checks the ICRC of the first RoCEv2 packet in p against the IP
// and UDP headers it was carried in: the layers right before the BTH must
// be IPv4 or IPv6 and UDP, exactly as captured. verifiable is false when
// there is no BTH, those layers are missing, or the capture is truncated;
// ok is then false too.
func VerifyICRC(p gopacket.Packet) (ok, verifiable bool) {
	if p.Metadata().Truncated {
		return false, false
	}
	ls := p.Layers()
	for i, l := range ls {
		b, isBTH := l.(*BTH)
		if !isBTH {
			continue
		}
		if i < 2 {
			return false, false
		}
		udp, isUDP := ls[i-1].(*layers.UDP)
		if !isUDP {
			return false, false
		}
		var ip []byte
		switch n := ls[i-2].(type) {
		case *layers.IPv4:
			ip = n.Contents
		case *layers.IPv6:
			ip = n.Contents
		default:
			return false, false
		}
		crc, good := rocev2.ICRCFromHeaders(ip, udp.Contents, b.pkt.Covered())
		if !good {
			return false, false
		}
		return crc == b.ICRC, true
	}
	return false, false
}

var errICRCNetwork = errors.New("pcap: ICRC needs an IPv4 layer without options or an IPv6 layer, and a UDP layer")

// flowForICRC describes the IP and UDP layers as a rocev2.Flow, whose ICRC
// method masks and encodes them the way the wire will carry them.
func flowForICRC(n gopacket.NetworkLayer, udp *layers.UDP) (rocev2.Flow, error) {
	var f rocev2.Flow
	if udp == nil {
		return f, errICRCNetwork
	}
	f.SrcPort, f.DstPort = uint16(udp.SrcPort), uint16(udp.DstPort)
	var src, dst netip.Addr
	var ok1, ok2 bool
	switch ip := n.(type) {
	case *layers.IPv4:
		if len(ip.Options) != 0 || (ip.IHL != 0 && ip.IHL != 5) {
			return f, errICRCNetwork
		}
		src, ok1 = netip.AddrFromSlice(ip.SrcIP.To4())
		dst, ok2 = netip.AddrFromSlice(ip.DstIP.To4())
		f.IPv4ID = ip.Id
		f.IPv4Flags = uint16(ip.Flags)<<13 | ip.FragOffset&0x1FFF
		f.TOS, f.TTL = ip.TOS, ip.TTL
	case *layers.IPv6:
		if ip.HopByHop != nil {
			return f, errICRCNetwork
		}
		src, ok1 = netip.AddrFromSlice(ip.SrcIP.To16())
		dst, ok2 = netip.AddrFromSlice(ip.DstIP.To16())
		// An IPv4-mapped address would turn the flow into IPv4.
		if src.Is4In6() || dst.Is4In6() {
			return f, errICRCNetwork
		}
		f.TOS, f.TTL, f.FlowLabel = ip.TrafficClass, ip.HopLimit, ip.FlowLabel
	default:
		return f, errICRCNetwork
	}
	if !ok1 || !ok2 {
		return f, errICRCNetwork
	}
	f.Src, f.Dst = src, dst
	return f, nil
}
