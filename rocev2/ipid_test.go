package rocev2

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInferIPv4ID(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fl := NewFlow(netip.MustParseAddrPort("198.18.0.11:49441"), netip.MustParseAddrPort("198.18.0.12:4791"))
	for _, n := range []int{0, 1, 5, 1024, 4096, 9000} {
		for _, id := range []uint16{0, 1, 2, 63, 0x718c, 0xffff, uint16(rng.Uint32())} {
			f := Fields{Opcode: RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: PSN(rng.Uint32() & PSNMask)}
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			pkt, err := f.Append(nil, payload)
			require.NoError(t, err)
			sent := fl
			sent.IPv4ID = id
			sent.SealICRC(pkt)

			got, ok := fl.InferIPv4ID(pkt)
			require.True(t, ok, "len %d id %#x", n, id)
			assert.Equal(t, id, got)

			// A flipped payload or header bit is caught (with 16 bits of
			// residual check: the seeded cases here are all caught).
			bad := append([]byte(nil), pkt...)
			bad[rng.IntN(len(bad)-ICRCLen)] ^= 1 << rng.IntN(8)
			if bad[bthQP] != pkt[bthQP] { // FECN/BECN/resv6 are masked
				continue
			}
			_, ok = fl.InferIPv4ID(bad)
			assert.False(t, ok, "len %d id %#x: corruption accepted", n, id)
		}
	}
}

func TestInferIPv4IDOnRxeVectorID(t *testing.T) {
	// The ConnectX-4 CNP was sent with IPv4 ID 0x718c.
	pkt := unhex(t, cx4CNP)
	var fr Frame
	require.NoError(t, ParseIPPacket(pkt, UDPPort, &fr))
	fl := NewFlow(netip.AddrPortFrom(fr.Src(), fr.SrcPort()), netip.AddrPortFrom(fr.Dst(), fr.DstPort()))
	id, ok := fl.InferIPv4ID(fr.Payload)
	require.True(t, ok)
	assert.Equal(t, uint16(0x718c), id)
}

func BenchmarkInferIPv4ID(b *testing.B) {
	pkt, fl := benchPacket(b, 1024)
	fl.IPv4ID = 0x5a5a
	fl.SealICRC(pkt)
	fl.IPv4ID = 0
	b.ReportAllocs()
	for b.Loop() {
		if id, ok := fl.InferIPv4ID(pkt); !ok || id != 0x5a5a {
			b.Fatal(id, ok)
		}
	}
}
