package pcap

import (
	"io"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

// benchFrame returns a 1024-byte RDMA READ response (FIRST, with AETH) from
// the rxe captures.
func benchFrame(b *testing.B) []byte {
	for _, f := range vectorFrames(b)["read_bw.pcap"] {
		var fr rocev2.Frame
		if rocev2.ParseEthernetFrame(f, rocev2.UDPPort, &fr) == nil && rocev2.Opcode(fr.Payload[0]) == rocev2.RCReadResponseFirst {
			return f
		}
	}
	b.Fatal("no READ response in read_bw.pcap")
	return nil
}

func BenchmarkDecodeNewPacket(b *testing.B) {
	frame := benchFrame(b)
	for _, bc := range []struct {
		name string
		opts gopacket.DecodeOptions
	}{{"default", gopacket.Default}, {"nocopy", gopacket.NoCopy}, {"lazy-nocopy", gopacket.DecodeOptions{Lazy: true, NoCopy: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, bc.opts)
				if p.Layer(LayerTypeAETH) == nil {
					b.Fatal("no AETH")
				}
			}
		})
	}
}

func BenchmarkDecodingLayerParser(b *testing.B) {
	frame := benchFrame(b)
	var (
		eth     layers.Ethernet
		ip4     layers.IPv4
		udp     layers.UDP
		payload gopacket.Payload
	)
	dl := NewDecodingLayers()
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &payload)
	for _, l := range dl.Layers() {
		parser.AddDecodingLayer(l)
	}
	decoded := make([]gopacket.LayerType, 0, 8)
	require.NoError(b, parser.DecodeLayers(frame, &decoded))
	require.Len(b, decoded, 6)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if err := parser.DecodeLayers(frame, &decoded); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyICRC(b *testing.B) {
	p := gopacket.NewPacket(benchFrame(b), layers.LayerTypeEthernet, gopacket.Default)
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := VerifyICRC(p); !ok {
			b.Fatal("ICRC")
		}
	}
}

func BenchmarkWriteRoCE(b *testing.B) {
	flow := testFlows()["ipv4"]
	f := testFields(rocev2.RCWriteMiddle, 1024)
	pkt, err := f.Append(nil, make([]byte, 1024))
	require.NoError(b, err)
	for _, format := range []Format{FormatPCAPNG, FormatPCAP} {
		b.Run(format.String(), func(b *testing.B) {
			w, err := NewWriter(io.Discard, WriterOptions{Format: format})
			require.NoError(b, err)
			b.ReportAllocs()
			b.SetBytes(int64(len(pkt)))
			for b.Loop() {
				if err := w.WriteRoCE(t0, Outbound, &flow, pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
