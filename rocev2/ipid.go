package rocev2

import (
	"encoding/binary"
	"hash/crc32"
)

// Inferring the IPv4 identification from the ICRC.
//
// The ICRC covers the IPv4 ID, which a UDP socket never shows its reader. But
// a CRC is linear: the ICRC of a packet sent with ID x differs from the ICRC
// computed for ID 0 by a value that depends only on x and on how many bytes
// follow the ID field. Undoing the effect of those L trailing bytes (the CRC
// register's zero-byte step is invertible) leaves the 32-bit contribution
// u(x) of the two ID bytes alone, and u is injective on 16 bits: x can be read
// back from it, and the 16 bits u does not need are a residual check. So a
// receiver that cannot see the IPv4 header still recovers the ID the sender
// used and verifies the ICRC with 16 of its 32 bits, instead of trusting the
// packet blindly. Packets from goroce peers carry ID 0 (or 0, 1, 2… for GSO
// segments) and take the fast path of an exact match.

// icrcIDOffset is the offset of the IPv4 ID in the ICRC's input (after the
// 8-byte LRH stand-in), and icrcIDEnd the offset just past it.
const (
	icrcIDOffset = 8 + 4
	icrcIDEnd    = icrcIDOffset + 2
)

// crcTopIndex inverts the table on its top byte: the top bytes of the 256
// entries of the reflected CRC-32 table are all different.
var crcTopIndex = func() (inv [256]uint8) {
	for i, v := range crc32.IEEETable {
		inv[v>>24] = uint8(i)
	}
	return inv
}()

// zeroByteInverse undoes one step r' = tab[r&0xff] ^ r>>8 of the raw CRC
// register over a zero byte.
func zeroByteInverse(r uint32) uint32 {
	idx := crcTopIndex[r>>24]
	return (r^crc32.IEEETable[idx])<<8 | uint32(idx)
}

// gf2Matrix is a linear map on 32-bit vectors over GF(2), stored by columns.
type gf2Matrix [32]uint32

func (m *gf2Matrix) apply(v uint32) (out uint32) {
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			out ^= m[i]
		}
	}
	return out
}

func (m *gf2Matrix) square() (sq gf2Matrix) {
	for i := range sq {
		sq[i] = m.apply(m[i])
	}
	return sq
}

// zeroInversePow[k] undoes 2^k zero bytes.
var zeroInversePow = func() (p [17]gf2Matrix) {
	for i := range p[0] {
		p[0][i] = zeroByteInverse(1 << i)
	}
	for k := 1; k < len(p); k++ {
		p[k] = p[k-1].square()
	}
	return p
}()

// undoZeroBytes returns the register difference d had before n zero bytes.
func undoZeroBytes(d uint32, n int) uint32 {
	for k := 0; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			d = zeroInversePow[k].apply(d)
		}
	}
	return d
}

// idFromContribution inverts u(x), the register difference that the two ID
// bytes x (high byte first) leave when fed from a zero register:
// u = tab[byte(tab[hi]) ^ lo] ^ tab[hi]>>8.
func idFromContribution(u uint32) (uint16, bool) {
	x := crcTopIndex[u>>24] // tab[x] is the only term with a top byte
	rest := u ^ crc32.IEEETable[x]
	hi := crcTopIndex[rest>>16&0xff]
	if crc32.IEEETable[hi]>>8 != rest {
		return 0, false // the residual 16 bits do not check out
	}
	lo := x ^ uint8(crc32.IEEETable[hi])
	return uint16(hi)<<8 | uint16(lo), true
}

// InferIPv4ID recovers the IPv4 identification that pkt (BTH through ICRC)
// must have travelled with for its ICRC to match this IPv4 flow, whatever
// f.IPv4ID says. ok is false when no ID makes it match: the packet is
// corrupt, or some other covered field differs (flags, addresses, ports).
func (f *Flow) InferIPv4ID(pkt []byte) (id uint16, ok bool) {
	if f.IsIPv6() || len(pkt) < BTHLen+ICRCLen {
		return 0, false
	}
	g := *f
	g.IPv4ID = 0
	covered := pkt[:len(pkt)-ICRCLen]
	d := g.ICRC(covered) ^ binary.LittleEndian.Uint32(pkt[len(covered):])
	if d == 0 {
		return 0, true
	}
	// Bytes of ICRC input after the ID field: rest of the IPv4 and UDP
	// headers, then the packet up to the pad.
	after := 8 + IPv4HeaderLen + UDPHeaderLen + len(covered) - icrcIDEnd
	return idFromContribution(undoZeroBytes(d, after))
}
