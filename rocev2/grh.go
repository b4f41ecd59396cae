package rocev2

import "net/netip"

// GRHLen is the size of the area in front of the payload of every UD
// receive: the InfiniBand GRH, which on RoCEv2 holds the IP header the
// packet arrived in. Receive buffers of UD QPs need GRHLen bytes more than
// the largest message, and a UD receive completion counts them.
const GRHLen = 40

// PutGRH writes the GRH area of a UD receive into b (GRHLen bytes) for a
// packet of roceLen bytes (BTH through ICRC) that arrived in flow f, from
// f.Src to f.Dst, as rxe fills it: for IPv6 the 40 bytes are the IPv6
// header; for IPv4 bytes 0-19 are zero and bytes 20-39 the IPv4 header,
// checksum included, where rdma-core's ibv_init_ah_from_wc looks for it.
func (f *Flow) PutGRH(b []byte, roceLen int) {
	var hdr [IPv6HeaderLen + UDPHeaderLen]byte
	n := f.encodeIPUDP(hdr[:], roceLen, false) - UDPHeaderLen
	b = b[:GRHLen]
	if n == IPv6HeaderLen {
		copy(b, hdr[:n])
		return
	}
	clear(b[:GRHLen-IPv4HeaderLen])
	copy(b[GRHLen-IPv4HeaderLen:], hdr[:n])
}

// GRHSource returns the sender's address from the GRH area of a UD receive
// (b holds at least GRHLen bytes), as ibv_init_ah_from_wc finds it: an
// IPv4 header with a valid checksum at bytes 20-39, or else an IPv6 header
// at bytes 0-39. ok is false when b holds neither.
func GRHSource(b []byte) (src, dst netip.Addr, ok bool) {
	if len(b) < GRHLen {
		return netip.Addr{}, netip.Addr{}, false
	}
	if h := b[GRHLen-IPv4HeaderLen : GRHLen]; h[0] == 0x45 && IPv4Checksum(h) == 0 {
		return netip.AddrFrom4([4]byte(h[12:16])), netip.AddrFrom4([4]byte(h[16:20])), true
	}
	if b[0]>>4 == 6 {
		return netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40])), true
	}
	return netip.Addr{}, netip.Addr{}, false
}
