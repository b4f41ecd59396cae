// Package pattern is the data an echo check sends: a deterministic stream
// whose byte at offset o depends on o and on the connection's index, so
// that a lost, repeated, reordered or crossed-over byte shows at its
// offset. The interop guest's smcguest and goroce's smcat both use it.
package pattern

import "encoding/binary"

// patternWord is the 8 bytes at offset 8*w of connection conn's stream
// (splitmix64 of the word index and connection).
func patternWord(conn int, w uint64) uint64 {
	z := w*0x9E3779B97F4A7C15 + uint64(conn+1)*0xD1B54A32D192ED03
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Fill fills p with conn's stream from offset off on.
func Fill(p []byte, conn int, off uint64) {
	var w [8]byte
	for i := 0; i < len(p); {
		o := off + uint64(i)
		binary.LittleEndian.PutUint64(w[:], patternWord(conn, o/8))
		n := copy(p[i:], w[o%8:])
		i += n
	}
}

// Check returns the index of the first byte of p that is not conn's
// stream at off+index, or -1.
func Check(p []byte, conn int, off uint64) int {
	var w [8]byte
	for i := 0; i < len(p); {
		o := off + uint64(i)
		binary.LittleEndian.PutUint64(w[:], patternWord(conn, o/8))
		want := w[o%8:]
		n := min(len(want), len(p)-i)
		for j := range n {
			if p[i+j] != want[j] {
				return i + j
			}
		}
		i += n
	}
	return -1
}
