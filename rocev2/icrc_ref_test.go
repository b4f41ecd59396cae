package rocev2

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// refICRC is the ICRC straight from its definition: CRC-32/IEEE over eight
// 0xFF bytes and the masked headers and packet, built as one slice.
func refICRC(ip, udp, pkt []byte) uint32 {
	var b bytes.Buffer
	b.Write(bytes.Repeat([]byte{0xff}, 8))
	m := bytes.Clone(ip)
	if m[0]>>4 == 4 {
		m[1], m[8], m[10], m[11] = 0xff, 0xff, 0xff, 0xff
	} else {
		m[0] |= 0x0f
		m[1], m[2], m[3], m[7] = 0xff, 0xff, 0xff, 0xff
	}
	b.Write(m)
	u := bytes.Clone(udp)
	u[6], u[7] = 0xff, 0xff
	b.Write(u)
	p := bytes.Clone(pkt)
	if len(p) > 4 {
		p[4] = 0xff
	}
	b.Write(p)
	return crc32.ChecksumIEEE(b.Bytes())
}

// The table-driven ICRC (slicing-by-8 over the headers, crc32.Update over
// the rest) equals the definition for every header shape: IPv4 with 0 to
// 40 bytes of options, IPv6, packets from 0 to 5000 bytes.
func TestICRCMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for i := range 2000 {
		var ip []byte
		if i%3 == 0 {
			ip = fill(IPv6HeaderLen)
			ip[0] = 0x60 | ip[0]&0x0f
		} else {
			ihl := 5 + rng.IntN(11)
			ip = fill(ihl * 4)
			ip[0] = 0x40 | byte(ihl)
		}
		udp := fill(UDPHeaderLen)
		pkt := fill([]int{0, 3, 12, 13, 20, 64, 1000, 4096, 5000}[i%9])
		got, ok := ICRCFromHeaders(ip, udp, pkt)
		require.True(t, ok)
		require.Equal(t, refICRC(ip, udp, pkt), got, "case %d: ip %d bytes, packet %d bytes", i, len(ip), len(pkt))
	}
}
