package pcap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rxevectors"
)

// vectorDir holds the kernel rxe captures (see CATALOG.md there).
const vectorDir = "../conformance/testdata/rxe"

// vectorRoCECounts is the number of RoCEv2 frames in each capture.
var vectorRoCECounts = rxevectors.RoCECounts

// vectorFrames returns every frame of every bundled capture, by file name,
// read with gopacket's own pcap reader.
func vectorFrames(t testing.TB) map[string][][]byte {
	t.Helper()
	out, err := rxevectors.All(vectorDir)
	require.NoError(t, err)
	return out
}

// readFile returns the bytes of a bundled capture.
func readFile(name string) ([]byte, error) { return os.ReadFile(filepath.Join(vectorDir, name)) }
