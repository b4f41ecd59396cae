package smcwire

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

// captureDir holds the kernel rxe captures (see its CATALOG.md).
const captureDir = "../../conformance/testdata/rxe"

// wireMsg is one message lifted out of a capture: a TCP payload or the
// payload of an RC SEND_ONLY, with the frame number (1-based, as
// Wireshark counts) and the IPv4 source.
type wireMsg struct {
	frame int
	src   string
	data  []byte
}

// capture is what the SMC tests need from one pcap file.
type capture struct {
	tcp   []wireMsg // non-empty TCP payloads
	sends []wireMsg // RC SEND_ONLY payloads
	syns  [][]byte  // TCP options of SYN segments
}

// loadCapture reads a capture with gopacket (for TCP) and rocev2 (for
// RoCE), the way a test would, not the way the package under test does.
func loadCapture(t testing.TB, name string) capture {
	t.Helper()
	fh, err := os.Open(filepath.Join(captureDir, name))
	require.NoError(t, err)
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	require.NoError(t, err)
	var c capture
	for n := 1; ; n++ {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		var f rocev2.Frame
		if rocev2.ParseEthernetFrame(data, rocev2.UDPPort, &f) == nil {
			var p rocev2.Packet
			require.NoError(t, p.Parse(f.Payload), "%s frame %d", name, n)
			if p.Opcode() == rocev2.RCSendOnly {
				c.sends = append(c.sends, wireMsg{n, f.Src().String(), p.Payload()})
			}
			continue
		}
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.NoCopy)
		tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok {
			continue
		}
		if tcp.SYN {
			c.syns = append(c.syns, tcp.Contents[20:])
		}
		if len(tcp.Payload) > 0 {
			src := pkt.NetworkLayer().NetworkFlow().Src().String()
			c.tcp = append(c.tcp, wireMsg{n, src, tcp.Payload})
		}
	}
	return c
}

// smcMessages returns every CLC, LLC and CDC message of the SMC captures,
// for the round-trip, truncation and fuzz-seed tests.
func smcMessages(t testing.TB) (clc, llc, cdc [][]byte) {
	t.Helper()
	for _, name := range []string{"smc_r_v2.pcap", "smcr_close.pcap", "smcr_echo_small.pcap"} {
		c := loadCapture(t, name)
		for _, m := range c.tcp {
			if IsCLC(m.data) {
				clc = append(clc, m.data)
			}
		}
		for _, m := range c.sends {
			switch Classify(m.data) {
			case KindCDC:
				cdc = append(cdc, m.data)
			case KindLLCv1, KindLLCv2:
				llc = append(llc, m.data)
			}
		}
	}
	return clc, llc, cdc
}
