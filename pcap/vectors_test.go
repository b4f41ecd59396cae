package pcap

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"
)

// vectorDir holds the kernel rxe captures (see CATALOG.md there).
const vectorDir = "../conformance/testdata/rxe"

// vectorRoCECounts is the number of RoCEv2 frames in each capture, from
// CATALOG.md ("ICRC (independent check): N valid").
var vectorRoCECounts = map[string]int{
	"atomic_fetch_add.pcap":        10,
	"rc_pingpong_s1024.pcap":       20,
	"rc_pingpong_s4096_m1024.pcap": 50,
	"read_bw.pcap":                 25,
	"rping.pcap":                   41,
	"smc_r_v2.pcap":                0,
	"smcr_close.pcap":              111,
	"smcr_echo_small.pcap":         74,
	"ud_pingpong_s512.pcap":        10,
	"write_bw.pcap":                25,
}

// vectorFrames returns every frame of every bundled capture, by file name,
// read with gopacket's own pcap reader.
func vectorFrames(t testing.TB) map[string][][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.pcap"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string][][]byte{}
	for _, name := range files {
		fh, err := os.Open(name)
		require.NoError(t, err)
		r, err := pcapgo.NewReader(fh)
		require.NoError(t, err, name)
		base := filepath.Base(name)
		out[base] = [][]byte{}
		for {
			data, _, err := r.ReadPacketData()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, name)
			out[base] = append(out[base], data)
		}
		require.NoError(t, fh.Close())
	}
	return out
}

// readFile returns the bytes of a bundled capture.
func readFile(name string) ([]byte, error) { return os.ReadFile(filepath.Join(vectorDir, name)) }
