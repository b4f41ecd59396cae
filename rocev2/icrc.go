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
// The masked headers live in the caller's stack arrays; handing them to
// crc32.Update would move those arrays to the heap (it dispatches through a
// function value), so the few header bytes go through a byte-wise table loop
// and only the payload, which is already the caller's memory, through the
// accelerated crc32.Update.
func icrcOver(hdr []byte, pkt []byte) uint32 {
	tab := crc32.IEEETable
	r := ^lrhCRC // the raw CRC register
	for _, v := range hdr {
		r = tab[byte(r)^v] ^ r>>8
	}
	n := min(len(pkt), BTHLen)
	for i, v := range pkt[:n] {
		if i == bthQP {
			v = 0xff // FECN, BECN, resv6
		}
		r = tab[byte(r)^v] ^ r>>8
	}
	return crc32.Update(^r, tab, pkt[n:])
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
