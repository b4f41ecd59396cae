package main

import (
	"fmt"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rocev2"
)

// roce is a RoCEv2 packet found in a frame.
type roce struct {
	bth          *pcap.BTH
	exts         []gopacket.Layer // the extended headers, in wire order
	src, dst     netip.Addr
	sport, dport uint16
	ip           gopacket.Layer // the *layers.IPv4 or *layers.IPv6 before the UDP header
	icrcOK       bool
	verifiable   bool
}

// endpoints returns the addresses of an IPv4 or IPv6 layer.
func endpoints(l gopacket.Layer) (src, dst netip.Addr) {
	switch ip := l.(type) {
	case *layers.IPv4:
		src, _ = netip.AddrFromSlice(ip.SrcIP)
		dst, _ = netip.AddrFromSlice(ip.DstIP)
	case *layers.IPv6:
		src, _ = netip.AddrFromSlice(ip.SrcIP)
		dst, _ = netip.AddrFromSlice(ip.DstIP)
	}
	return src.Unmap(), dst.Unmap()
}

// classify finds the RoCEv2 packet of a frame: the BTH after a UDP header
// to port 4791. It returns ok false for a frame that is not RoCEv2, and a
// non-nil malformed for one whose RoCEv2 part cannot be trusted: a BTH that
// rocev2 rejects, or a frame cut short by the capture or by its own IP/UDP
// lengths.
func classify(p gopacket.Packet, rec *pcap.Record) (r roce, ok bool, malformed error) {
	ls := p.Layers()
	for i, l := range ls {
		udp, isUDP := l.(*layers.UDP)
		if !isUDP || udp.DstPort != rocev2.UDPPort {
			continue
		}
		if i > 0 {
			r.ip = ls[i-1]
			r.src, r.dst = endpoints(r.ip)
		}
		r.sport, r.dport = uint16(udp.SrcPort), uint16(udp.DstPort)
		var next gopacket.Layer
		if i+1 < len(ls) {
			next = ls[i+1]
		}
		switch n := next.(type) {
		case *pcap.BTH:
			if p.Metadata().Truncated {
				if rec.Length > len(rec.Data) {
					return r, true, fmt.Errorf("capture truncated to %d of %d bytes", len(rec.Data), rec.Length)
				}
				return r, true, rocev2.ErrFrameTruncated
			}
			r.bth = n
			for _, e := range ls[i+2:] {
				if !pcap.IsRoCELayerType(e.LayerType()) {
					break
				}
				r.exts = append(r.exts, e)
			}
			r.icrcOK, r.verifiable = pcap.VerifyICRC(p)
			return r, true, nil
		case *gopacket.DecodeFailure:
			return r, true, n.Error()
		case nil:
			return r, true, rocev2.ErrShort // empty UDP payload
		}
		return r, false, nil
	}
	return r, false, nil
}

// tcpEndpoints returns the addresses and ports of a TCP segment, if p has one.
func tcpEndpoints(p gopacket.Packet) (src, dst netip.AddrPort, ok bool) {
	ls := p.Layers()
	for i, l := range ls {
		tcp, isTCP := l.(*layers.TCP)
		if !isTCP {
			continue
		}
		var s, d netip.Addr
		if i > 0 {
			s, d = endpoints(ls[i-1])
		}
		return netip.AddrPortFrom(s, uint16(tcp.SrcPort)), netip.AddrPortFrom(d, uint16(tcp.DstPort)), true
	}
	return src, dst, false
}
