package rocev2

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/internal/race"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func benchPacket(tb testing.TB, n int) ([]byte, Flow) {
	fl := NewFlow(netip.MustParseAddrPort("127.0.0.1:49441"), netip.MustParseAddrPort("127.0.0.2:4791"))
	f := Fields{Opcode: RCWriteMiddle, PKey: 0xffff, DestQP: 0x11, PSN: 7}
	pkt, err := f.Append(make([]byte, 0, 8192), make([]byte, n))
	require.NoError(tb, err)
	fl.SealICRC(pkt)
	return pkt, fl
}

func BenchmarkParse(b *testing.B) {
	pkt, _ := benchPacket(b, 4096)
	var p Packet
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Parse(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildHeaders(b *testing.B) {
	f := Fields{Opcode: RCWriteFirst, PKey: 0xffff, DestQP: 0x11, PSN: 7, VA: 1 << 20, RKey: 0x1234, Len: 65536}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.AppendHeaders(buf[:0], 4096); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkICRC(b *testing.B) {
	for _, n := range []int{64, 1024, 4096} {
		b.Run(itoaBench(n), func(b *testing.B) {
			pkt, fl := benchPacket(b, n)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				if !fl.VerifyICRC(pkt) {
					b.Fatal("bad icrc")
				}
			}
		})
	}
}

func itoaBench(n int) string {
	switch n {
	case 64:
		return "64B"
	case 1024:
		return "1KiB"
	}
	return "4KiB"
}

// The data path parses, builds and checks every packet: none of it may allocate.
func TestHotPathDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	pkt, fl := benchPacket(t, 1024)
	var p Packet
	f := Fields{Opcode: RCWriteFirst, PKey: 0xffff, DestQP: 0x11, VA: 1, RKey: 2, Len: 3}
	buf := make([]byte, 0, 2048)
	payload := make([]byte, 1024)
	var fr Frame
	frame := make([]byte, EthernetHeaderLen+IPv4HeaderLen+UDPHeaderLen+len(pkt))
	n := fl.EncodeEthernet(frame)
	n += fl.EncodeIPUDP(frame[n:], len(pkt))
	copy(frame[n:], pkt)
	allocs := testing.AllocsPerRun(100, func() {
		_ = p.Parse(pkt)
		_ = FieldsOf(&p)
		out, _ := f.Append(buf[:0], payload)
		fl.SealICRC(out)
		_ = fl.VerifyICRC(pkt)
		_ = ParseEthernetFrame(frame, UDPPort, &fr)
		_, _ = fr.VerifyICRC()
		_ = p.Parse(nil) // the error path too
	})
	assert.Zero(t, allocs)
	ok, _ := fr.VerifyICRC()
	assert.True(t, ok)
}
