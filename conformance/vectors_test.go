package conformance

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rxevectors"
	"github.com/goroce/goroce/rocev2"
)

// vectorFrames returns every frame of every bundled rxe capture.
func vectorFrames(t testing.TB) map[string][][]byte {
	t.Helper()
	out, err := rxevectors.All("testdata/rxe")
	require.NoError(t, err)
	return out
}

// Every RoCE packet a kernel rxe peer sent parses, its ICRC verifies, and
// re-building it from the parsed fields reproduces it byte for byte.
func TestRxeVectorsParseVerifyRebuild(t *testing.T) {
	total := 0
	for name, frames := range vectorFrames(t) {
		t.Run(name, func(t *testing.T) {
			n := 0
			for i, frame := range frames {
				var f rocev2.Frame
				if err := rocev2.ParseEthernetFrame(frame, rocev2.UDPPort, &f); err != nil {
					require.ErrorIs(t, err, rocev2.ErrNotRoCE, "frame %d", i+1)
					continue
				}
				n++
				var p rocev2.Packet
				require.NoError(t, p.Parse(f.Payload), "frame %d", i+1)
				match, ok := f.VerifyICRC()
				require.True(t, ok)
				assert.True(t, match, "frame %d: ICRC", i+1)

				fields := rocev2.FieldsOf(&p)
				rebuilt, err := fields.Append(nil, p.Payload())
				require.NoError(t, err)
				c, _ := f.ICRC()
				rocev2.PutICRC(rebuilt, c)
				assert.Equal(t, f.Payload, rebuilt, "frame %d (%v): rebuild", i+1, p.Opcode())

				// A UDP-socket receiver sees neither the IPv4 ID nor the
				// flags; it recovers the ID from the ICRC (rxe uses random IDs).
				fl := rocev2.NewFlow(netip.AddrPortFrom(f.Src(), f.SrcPort()), netip.AddrPortFrom(f.Dst(), f.DstPort()))
				id, ok := fl.InferIPv4ID(f.Payload)
				require.True(t, ok, "frame %d: IPv4 ID not inferred", i+1)
				assert.Equal(t, binary.BigEndian.Uint16(f.IP[4:]), id, "frame %d: IPv4 ID", i+1)
			}
			t.Logf("%d RoCE packets", n)
			total += n
		})
	}
	require.Greater(t, total, 300)
}

// Every prefix of every vector frame, and of its RoCE payload, is rejected
// with a typed error or parsed within bounds; nothing panics.
func TestRxeVectorsEveryPrefixRejectedCleanly(t *testing.T) {
	prefixes := 0
	for name, frames := range vectorFrames(t) {
		for i, frame := range frames {
			var f rocev2.Frame
			if rocev2.ParseEthernetFrame(frame, rocev2.UDPPort, &f) != nil {
				continue
			}
			payload := append([]byte(nil), f.Payload...)
			for n := 0; n < len(payload); n++ {
				prefixes++
				var p rocev2.Packet
				err := p.Parse(payload[:n:n])
				if err != nil {
					var pe rocev2.ParseError
					require.ErrorAs(t, err, &pe, "%s frame %d prefix %d", name, i+1, n)
					continue
				}
				// Only a payload-carrying packet can shrink and stay valid,
				// and then its ICRC no longer matches.
				require.True(t, p.Opcode().Is(rocev2.OpPayload), "%s frame %d prefix %d", name, i+1, n)
			}
			for n := 0; n < len(frame); n++ {
				var g rocev2.Frame
				if err := rocev2.ParseEthernetFrame(frame[:n:n], rocev2.UDPPort, &g); err != nil {
					var pe rocev2.ParseError
					require.ErrorAs(t, err, &pe)
					continue
				}
				t.Fatalf("%s frame %d: prefix %d of %d accepted", name, i+1, n, len(frame))
			}
		}
	}
	t.Logf("%d payload prefixes", prefixes)
}

// The GRH area of a UD receive is built from what a UDP socket learns of a
// packet (its sender and receiver, the IPv4 ID inferred from the ICRC, and
// the TTL and TOS from control messages), and must equal what rxe copies
// there: 20 zero bytes and the IPv4 header as it came off the wire,
// checksum included. Checked on every UD packet kernel rxe sent.
func TestRxeVectorsGRHArea(t *testing.T) {
	n := 0
	for name, frames := range vectorFrames(t) {
		for i, frame := range frames {
			var f rocev2.Frame
			if rocev2.ParseEthernetFrame(frame, rocev2.UDPPort, &f) != nil {
				continue
			}
			var p rocev2.Packet
			require.NoError(t, p.Parse(f.Payload))
			if p.Opcode().Transport() != rocev2.TransportUD {
				continue
			}
			n++
			fl := rocev2.NewFlow(netip.AddrPortFrom(f.Src(), f.SrcPort()), netip.AddrPortFrom(f.Dst(), f.DstPort()))
			id, ok := fl.InferIPv4ID(f.Payload)
			require.True(t, ok)
			fl.IPv4ID, fl.TOS, fl.TTL = id, f.IP[1], f.IP[8]
			var grh [rocev2.GRHLen]byte
			fl.PutGRH(grh[:], len(f.Payload))
			want := append(make([]byte, 20), f.IP[:20]...)
			assert.Equal(t, want, grh[:], "%s frame %d", name, i+1)
			src, dst, ok := rocev2.GRHSource(grh[:])
			require.True(t, ok)
			assert.Equal(t, f.Src(), src)
			assert.Equal(t, f.Dst(), dst)
		}
	}
	require.Equal(t, 15, n, "UD packets in the captures (ud_pingpong, and rping's CM MADs)")
}
