package tcpopt

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// smc is the option as a Signaller writes it (the kernel pads after it).
var smc = []byte{optKind, optLen, 0xE2, 0xD4, 0xC3, 0xD9, 1, 1}

// linuxSYNOpts is what Linux 6.x puts in a SYN of an AF_SMC socket.
var linuxSYNOpts = append([]byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 6}, Option[:]...)

// tcpHdr builds a TCP SYN header carrying opts (padded to 4 bytes with
// EOL), with its data offset set to match.
func tcpHdr(opts []byte) []byte {
	for len(opts)%4 != 0 {
		opts = append(opts, 0)
	}
	h := make([]byte, 20, 20+len(opts))
	binary.BigEndian.PutUint16(h[0:], 40000)
	binary.BigEndian.PutUint16(h[2:], 80)
	h[12] = byte((20+len(opts))/4) << 4
	h[13] = 0x02
	return append(h, opts...)
}

func ipv4(payload []byte) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	h[8], h[9] = 64, protoTCP
	copy(h[12:], []byte{127, 0, 0, 1, 127, 0, 0, 1})
	return append(h, payload...)
}

// ipv6 builds an IPv6 header whose chain runs through ext (each already
// encoded, first byte its next header) to TCP.
func ipv6(first byte, ext []byte, payload []byte) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(ext)+len(payload)))
	h[6], h[7] = first, 64
	h[23], h[39] = 1, 1
	return append(append(h, ext...), payload...)
}

// ext8 is an 8-byte extension header (hop-by-hop, destination options or
// routing: length 0 in 8-byte units) whose next header is next.
func ext8(next byte) []byte { return []byte{next, 0, 1, 4, 0, 0, 0, 0} }

func TestParseSYN(t *testing.T) {
	withSMC := ipv4(tcpHdr(linuxSYNOpts))
	cases := []struct {
		name    string
		b       []byte
		want    bool
		wantErr bool
	}{
		{"IPv4, Linux's SYN", withSMC, true, false},
		{"IPv4, option without NOPs, last", ipv4(tcpHdr(append([]byte{2, 4, 5, 0xb4}, smc[:6]...))), true, false},
		{"IPv4, Signaller's layout", ipv4(tcpHdr(append([]byte{2, 4, 5, 0xb4, 4, 2, 1, 1}, smc...))), true, false},
		{"IPv4, no options", ipv4(tcpHdr(nil)), false, false},
		{"IPv4, options without SMC", ipv4(tcpHdr([]byte{2, 4, 5, 0xb4, 4, 2, 1, 3, 3, 7})), false, false},
		{"longer option with the ExID", ipv4(tcpHdr([]byte{optKind, 8, 0xE2, 0xD4, 0xC3, 0xD9, 0xAA, 0xBB})), true, false},
		{"wrong ExID", ipv4(tcpHdr([]byte{optKind, 6, 0xE2, 0xD4, 0xC3, 0xDA})), false, false},
		{"odd length with the ExID (Linux wants it even)", ipv4(tcpHdr([]byte{optKind, 7, 0xE2, 0xD4, 0xC3, 0xD9, 0xAA, 1})), false, false},
		{"2-byte ExID form", ipv4(tcpHdr([]byte{optKind, 4, 0xE2, 0xD4})), false, false},
		{"other kind with the ExID", ipv4(tcpHdr([]byte{253, 6, 0xE2, 0xD4, 0xC3, 0xD9})), false, false},
		{"option length 0 ends the walk", ipv4(tcpHdr(append([]byte{30, 0}, smc...))), false, false},
		{"option length 1 ends the walk", ipv4(tcpHdr(append([]byte{30, 1}, smc...))), false, false},
		{"option length past the header", ipv4(tcpHdr(append([]byte{30, 40}, smc...))), false, false},
		{"SMC option length past the header", ipv4(tcpHdr([]byte{1, 1, optKind, 12, 0xE2, 0xD4, 0xC3, 0xD9})), false, false},
		{"kind without length byte", ipv4(tcpHdr([]byte{1, 1, 1, optKind})), false, false},
		{"SMC after End of Option List", ipv4(tcpHdr(append([]byte{0, 1}, smc...))), false, false},
		{"SMC before a malformed option", ipv4(tcpHdr(append(smc[:6:6], 30, 0))), true, false},
		{"SMC bytes in the payload only", append(ipv4(tcpHdr(nil)), Option[:]...), false, false},

		{"empty", nil, false, true},
		{"IPv4, truncated header", withSMC[:19], false, true},
		{"IPv4, IHL below 5", func() []byte { b := clone(withSMC); b[0] = 0x44; return b }(), false, true},
		{"IPv4, IHL past the end", func() []byte { b := clone(withSMC)[:40]; b[0] = 0x4f; return b }(), false, true},
		{"IPv4, not TCP", func() []byte { b := clone(withSMC); b[9] = 17; return b }(), false, true},
		{"IPv4, TCP header truncated", withSMC[:39], false, true},
		{"data offset below 5", func() []byte { b := clone(withSMC); b[20+12] = 4 << 4; return b }(), false, true},
		{"data offset past the end", withSMC[:len(withSMC)-1], false, true},
		{"data offset 15 on a short header", func() []byte { b := clone(withSMC); b[20+12] = 15 << 4; return b }(), false, true},
		{"IP version 5", func() []byte { b := clone(withSMC); b[0] = 0x55; return b }(), false, true},

		{"IPv6 with option", ipv6(protoTCP, nil, tcpHdr(linuxSYNOpts)), true, false},
		{"IPv6 without option", ipv6(protoTCP, nil, tcpHdr([]byte{2, 4, 5, 0xa0})), false, false},
		{"IPv6, hop-by-hop and destination options", ipv6(protoHopByHop, append(ext8(protoDstOpts), ext8(protoTCP)...), tcpHdr(linuxSYNOpts)), true, false},
		{"IPv6, fragment header", ipv6(protoFragment, []byte{protoTCP, 0, 0, 0, 0, 0, 0, 1}, tcpHdr(linuxSYNOpts)), true, false},
		{"IPv6, AH (12 bytes)", ipv6(protoAH, []byte{protoTCP, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, tcpHdr(linuxSYNOpts)), true, false},
		{"IPv6, truncated header", ipv6(protoTCP, nil, nil)[:39], false, true},
		{"IPv6, truncated extension header", ipv6(protoHopByHop, []byte{protoTCP, 0, 1, 4}, nil), false, true},
		{"IPv6, extension header past the end", ipv6(protoHopByHop, []byte{protoTCP, 200, 1, 4, 0, 0, 0, 0}, tcpHdr(nil)), false, true},
		{"IPv6, UDP", ipv6(17, nil, tcpHdr(nil)), false, true},
		{"IPv6, extension header loop", ipv6(protoHopByHop, func() []byte {
			var b []byte
			for range maxExtHeaders + 1 {
				b = append(b, ext8(protoHopByHop)...)
			}
			return b
		}(), tcpHdr(nil)), false, true},
		{"IPv6, TCP header truncated", ipv6(protoTCP, nil, tcpHdr(nil)[:19]), false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSYN(tc.b)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrMalformedSYN)
				require.False(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// FuzzParseSYN: no input makes the parser panic or read out of bounds
// (the race detector and bounds checks would tell), and a true answer
// always means the bytes really are there.
func FuzzParseSYN(f *testing.F) {
	f.Add(ipv4(tcpHdr(linuxSYNOpts)))
	f.Add(ipv6(protoHopByHop, ext8(protoTCP), tcpHdr(linuxSYNOpts)))
	f.Add(ipv4(tcpHdr([]byte{30, 0})))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseSYN(b)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformedSYN)
			require.False(t, got)
		}
		if got {
			require.True(t, bytes.Contains(b, []byte{0xE2, 0xD4, 0xC3, 0xD9}))
		}
	})
}
