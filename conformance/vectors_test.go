package conformance

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

// vectorFrames returns every frame of every bundled rxe capture.
func vectorFrames(t testing.TB) map[string][][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/rxe/*.pcap")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string][][]byte{}
	for _, name := range files {
		fh, err := os.Open(name)
		require.NoError(t, err)
		r, err := pcapgo.NewReader(fh)
		require.NoError(t, err, name)
		for {
			data, _, err := r.ReadPacketData()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, name)
			out[filepath.Base(name)] = append(out[filepath.Base(name)], data)
		}
		fh.Close()
	}
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
			}
			t.Logf("%d RoCE packets", n)
			total += n
		})
	}
	require.Greater(t, total, 300)
}
