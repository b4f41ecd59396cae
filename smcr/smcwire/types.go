package smcwire

import (
	"encoding/hex"
	"net/netip"
	"strings"
)

// GID is a 16-byte RoCE GID (an IPv6 or IPv4-mapped address for RoCEv2).
type GID [16]byte

// Addr returns the GID as an IP address; IPv4-mapped GIDs stay mapped.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// String formats the GID as an address, e.g. "::ffff:198.18.0.11".
func (g GID) String() string { return g.Addr().String() }

// MarshalText makes JSON show the GID as its address string.
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// MAC is a 6-byte Ethernet address.
type MAC [6]byte

// String formats the MAC as "52:54:00:00:00:11".
func (m MAC) String() string {
	const hexd = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i, v := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hexd[v>>4], hexd[v&15])
	}
	return string(b)
}

// MarshalText makes JSON show the MAC as a string.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// PeerID is the 8-byte SMC system identifier (Linux: two random bytes and
// a RoCE MAC).
type PeerID [8]byte

// String formats the peer ID as 16 hex digits.
func (p PeerID) String() string { return hex.EncodeToString(p[:]) }

// MarshalText makes JSON show the peer ID as hex.
func (p PeerID) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// EID is a 32-byte SMCv2 enterprise ID (user EID or system EID): ASCII,
// padded with blanks.
type EID [32]byte

// String returns the EID without its blank (or NUL) padding.
func (e EID) String() string { return trimPad(e[:]) }

// MarshalText makes JSON show the EID as text.
func (e EID) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// EIDFrom pads s with blanks (or truncates it) to an EID.
func EIDFrom(s string) (e EID) { padInto(e[:], s); return e }

// Hostname is the 32-byte blank-padded host name of a CLC first-contact
// extension.
type Hostname [32]byte

// String returns the host name without its padding.
func (h Hostname) String() string { return trimPad(h[:]) }

// MarshalText makes JSON show the host name as text.
func (h Hostname) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// HostnameFrom pads s with blanks (or truncates it) to a Hostname.
func HostnameFrom(s string) (h Hostname) { padInto(h[:], s); return h }

func trimPad(b []byte) string { return strings.TrimRight(string(b), " \x00") }

func padInto(dst []byte, s string) {
	n := copy(dst, s)
	for i := n; i < len(dst); i++ {
		dst[i] = ' '
	}
}

// QPMTU is the 4-bit IB MTU enum SMC exchanges in CLC Accept/Confirm and
// LLC ADD LINK (the verbs enum ib_mtu: 1 = 256 ... 5 = 4096).
type QPMTU uint8

// Bytes returns the MTU in bytes, or 0 for a value outside 1..5.
func (m QPMTU) Bytes() int {
	if m < 1 || m > 5 {
		return 0
	}
	return 128 << m
}

// QPMTUFor returns the enum for an MTU of n bytes (256..4096), or 0.
func QPMTUFor(n int) QPMTU {
	for m := QPMTU(1); m <= 5; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

// RMBESize decodes the 4-bit compressed RMBE size of CLC Accept/Confirm:
// 2^(c+14) bytes, so 0 is 16 KiB and 2 is 64 KiB.
func RMBESize(c uint8) uint32 { return 1 << (uint32(c&0x0F) + 14) }

// RMBESizeCode compresses a buffer size the way Linux does
// (smc_compress_bufsize): sizes up to 16 KiB give 0, larger ones round up
// to the next power of two; the result is clamped to 15 (512 MiB), the
// largest the 4-bit field holds.
func RMBESizeCode(size int) uint8 {
	if size <= 16384 {
		return 0
	}
	c := uint8(0)
	for v := (size - 1) >> 14; v > 0; v >>= 1 {
		c++
	}
	if c > 15 {
		c = 15
	}
	return c
}

func be24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

func putBE24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }

// grow appends n zero bytes to b and returns the extended slice and the new part.
func grow(b []byte, n int) ([]byte, []byte) {
	l := len(b)
	b = append(b, make([]byte, n)...)
	return b, b[l:]
}
