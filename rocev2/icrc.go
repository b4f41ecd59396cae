package rocev2

import (
	"encoding/binary"
	"hash/crc32"
)

// The ICRC (RoCEv2 annex A17.3) is CRC-32/IEEE over
//
//	8 x 0xFF | IP header (variant fields = 1s) | UDP header (checksum = 1s) |
//	BTH (byte 4 = 1s) | extended headers | payload | pad
//
// stored least-significant byte first. The 8 bytes of 0xFF stand in for the
// masked LRH of native InfiniBand; rxe seeds its CRC with the register value
// they leave (0xDEBB20E3), which is what lrhCRC is in crc32.Update's terms.
//
// Variant fields masked to 1s: IPv4 TOS, TTL and header checksum; IPv6 traffic
// class, flow label and hop limit; UDP checksum; BTH FECN/BECN/resv6. The IPv4
// identification and flags/fragment offset are NOT masked: a receiver that
// cannot see the IPv4 header (a plain UDP socket) cannot verify the ICRC of an
// IPv4 packet unless it knows the sender's IP ID (see docs/ARCHITECTURE.md).

var lrhCRC = crc32.Update(0, crc32.IEEETable, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

// icrcOver runs the ICRC over hdr (IP and UDP headers, already masked) and
// pkt (BTH through pad). It masks the BTH itself.
//
// The masked headers and the BTH are copied into one stack buffer and run
// through a slicing-by-8 loop of our own: handing a stack array to
// crc32.Update would move it to the heap (it dispatches through a function
// value), and a byte-wise loop over those 40 to 60 bytes cost more than the
// CLMUL-accelerated rest of a 4 KiB packet. The rest of the packet, which
// is already the caller's memory, goes through crc32.Update when it is long.
func icrcOver(hdr []byte, pkt []byte) uint32 {
	var buf [60 + UDPHeaderLen + BTHLen]byte // IPv4 with maximal options + UDP + BTH
	n := copy(buf[:], hdr)
	b := min(len(pkt), BTHLen)
	copy(buf[n:], pkt[:b])
	if b > bthQP {
		buf[n+bthQP] = 0xff // FECN, BECN, resv6
	}
	r := slicing8(^lrhCRC, buf[:n+b]) // the raw CRC register
	if rest := pkt[b:]; len(rest) < slicingMax {
		return ^slicing8(r, rest)
	}
	return crc32.Update(^r, crc32.IEEETable, pkt[b:])
}

// slicingMax is the length below which slicing-by-8 beats crc32.Update:
// on amd64 crc32.Update runs inputs shorter than 64 bytes (and the last
// bytes of longer ones) a byte at a time; from 64 bytes on its CLMUL path
// wins.
const slicingMax = 64

// slice8 holds the slicing-by-8 tables of CRC-32/IEEE: slice8[0] is the
// byte-wise table, slice8[k][v] the register contribution of byte v followed
// by k zero bytes.
var slice8 = func() (t [8][256]uint32) {
	t[0] = *crc32.IEEETable
	for v := range 256 {
		for k := 1; k < 8; k++ {
			r := t[k-1][v]
			t[k][v] = t[0][byte(r)] ^ r>>8
		}
	}
	return t
}()

// slicing8 runs the raw CRC register r over p, eight bytes per step.
func slicing8(r uint32, p []byte) uint32 {
	t := &slice8
	for len(p) >= 8 {
		r ^= binary.LittleEndian.Uint32(p)
		r = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][r>>24] ^ t[5][r>>16&0xff] ^ t[6][r>>8&0xff] ^ t[7][r&0xff]
		p = p[8:]
	}
	for _, v := range p {
		r = t[0][byte(r)^v] ^ r>>8
	}
	return r
}

// ICRCFromHeaders computes the ICRC of pkt (BTH through pad, no trailer) as
// carried under the given IP header (IPv4 with options, or the 40-byte IPv6
// fixed header) and UDP header, exactly as they appear on the wire. It
// returns false if ip is not a well-formed IPv4 or IPv6 header or udp is not
// 8 bytes.
func ICRCFromHeaders(ip, udp, pkt []byte) (uint32, bool) {
	if len(udp) != UDPHeaderLen || len(ip) == 0 {
		return 0, false
	}
	var buf [60 + UDPHeaderLen]byte // IPv4 with maximal options, or IPv6
	var n int
	switch ip[0] >> 4 {
	case 4:
		ihl := int(ip[0]&0x0F) * 4
		if ihl < IPv4HeaderLen || len(ip) != ihl {
			return 0, false
		}
		n = copy(buf[:], ip)
		buf[1] = 0xff                 // TOS
		buf[8] = 0xff                 // TTL
		buf[10], buf[11] = 0xff, 0xff // header checksum
	case 6:
		if len(ip) != IPv6HeaderLen {
			return 0, false
		}
		n = copy(buf[:], ip)
		buf[0] = 0x6f // version 6, traffic class high nibble
		buf[1], buf[2], buf[3] = 0xff, 0xff, 0xff
		buf[7] = 0xff // hop limit
	default:
		return 0, false
	}
	n += copy(buf[n:], udp)
	buf[n-2], buf[n-1] = 0xff, 0xff // UDP checksum
	return icrcOver(buf[:n], pkt), true
}

// PutICRC stores crc as the packet's trailer (the last four bytes of pkt).
func PutICRC(pkt []byte, crc uint32) {
	binary.LittleEndian.PutUint32(pkt[len(pkt)-ICRCLen:], crc)
}
