package rocev2

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// A ConnectX-4 Lx CNP (from scapy's RoCE regression test): a real RNIC's
// frame, IPv4 ID 0x718c and TOS 0xc2, UDP source port 0.
const cx4CNP = `45c2 003c 718c 4000 4011 9161 0a00 1101 0a00 1201
	0000 12b7 0028 0000
	8100 ffff 4000 0118 0000 0000
	0000 0000 0000 0000 0000 0000 0000 0000
	82fd 002a`

// A worked example: RC SEND_ONLY "ABCDE" with pad 3.
const sendOnlyV4 = `45 00 00 34 00 00 40 00 40 11 b7 65 c0 a8 01 01 c0 a8 01 02
	d2 34 12 b7 00 20 00 00
	04 30 ff ff 00 00 00 11 80 00 00 01
	41 42 43 44 45 00 00 00
	a3 f3 94 7e`

func TestICRCGoldenFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		ip   string
		want uint32
	}{
		{"ConnectX-4 Lx CNP", cx4CNP, 0x2A00FD82},
		{"RC SEND_ONLY pad 3", sendOnlyV4, 0x7E94F3A3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkt := unhex(t, tc.ip)
			var f Frame
			require.NoError(t, ParseIPPacket(pkt, UDPPort, &f))
			got, ok := f.ICRC()
			require.True(t, ok)
			assert.Equal(t, tc.want, got)
			match, ok := f.VerifyICRC()
			assert.True(t, ok)
			assert.True(t, match)
			assert.Zero(t, IPv4Checksum(f.IP), "IPv4 header checksum")

			var p Packet
			require.NoError(t, p.Parse(f.Payload))
			assert.Equal(t, tc.want, p.ICRC())

			// The same ICRC from a Flow rebuilt from the header fields.
			fl := NewFlow(netip.AddrPortFrom(f.Src(), f.SrcPort()), netip.AddrPortFrom(f.Dst(), f.DstPort()))
			fl.IPv4ID = uint16(f.IP[4])<<8 | uint16(f.IP[5])
			fl.TOS, fl.TTL = f.IP[1], f.IP[8]
			assert.True(t, fl.VerifyICRC(f.Payload))
			fl.IPv4ID++
			assert.False(t, fl.VerifyICRC(f.Payload), "the IPv4 ID is covered")
		})
	}
}

func TestICRCIPv6(t *testing.T) {
	// The same packet over IPv6 fe80::1 -> fe80::2: crc32 0x07A69D92.
	fl := NewFlow(netip.MustParseAddrPort("[fe80::1]:53812"), netip.MustParseAddrPort("[fe80::2]:4791"))
	f := Fields{Opcode: RCSendOnly, PKey: 0xffff, DestQP: 0x11, AckReq: true, PSN: 1}
	pkt, err := f.Append(nil, []byte("ABCDE"))
	require.NoError(t, err)
	fl.SealICRC(pkt)
	assert.Equal(t, []byte{0x92, 0x9d, 0xa6, 0x07}, pkt[len(pkt)-4:])

	// Masked fields do not change it.
	fl.TOS, fl.TTL, fl.FlowLabel = 0xb8, 1, 0xabcde
	assert.True(t, fl.VerifyICRC(pkt))
	BTH(pkt).SetFECN(true)
	BTH(pkt).SetBECN(true)
	assert.True(t, fl.VerifyICRC(pkt))
	// Unmasked ones do.
	fl.SrcPort++
	assert.False(t, fl.VerifyICRC(pkt))
}

func TestFlowEncodeMatchesFrame(t *testing.T) {
	want := unhex(t, sendOnlyV4)
	fl := NewFlow(netip.MustParseAddrPort("192.168.1.1:53812"), netip.MustParseAddrPort("192.168.1.2:4791"))
	f := Fields{Opcode: RCSendOnly, PKey: 0xffff, DestQP: 0x11, AckReq: true, PSN: 1}
	buf := make([]byte, MaxEncapLen, 256)
	pkt, err := f.Append(buf[MaxEncapLen:], []byte("ABCDE"))
	require.NoError(t, err)
	fl.SealICRC(pkt)
	hl := fl.IPHeaderLen() + UDPHeaderLen
	fl.EncodeIPUDP(buf[MaxEncapLen-hl:], len(pkt))
	assert.Equal(t, want, buf[MaxEncapLen-hl:MaxEncapLen+len(pkt)])
}
