// Package rxevectors reads the bundled captures of kernel rxe peers
// (conformance/testdata/rxe, see CATALOG.md there) for tests. It reads them
// with gopacket's pcap reader, not goroce's, so that the tests of goroce's
// reader and layers check against an independent one.
package rxevectors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/gopacket/pcapgo"
)

// RoCECounts is the number of RoCEv2 frames in each capture, from
// CATALOG.md ("ICRC (independent check): N valid").
var RoCECounts = map[string]int{
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

// Frames returns every frame of the capture file.
func Frames(file string) ([][]byte, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	r, err := pcapgo.NewReader(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	out := [][]byte{}
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, data)
	}
}

// All returns every frame of every capture in dir, by file name.
func All(dir string) (map[string][][]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pcap"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no captures in %s", dir)
	}
	out := map[string][][]byte{}
	for _, file := range files {
		frames, err := Frames(file)
		if err != nil {
			return nil, err
		}
		out[filepath.Base(file)] = frames
	}
	return out, nil
}
