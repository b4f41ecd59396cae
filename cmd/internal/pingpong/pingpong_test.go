package pingpong

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCheckPattern(t *testing.T) {
	const page = 4096
	goroce := func(n int) []byte {
		b := make([]byte, n)
		fillPattern(b, page)
		return b
	}
	// rdmaCore is what the original client sends with -c: 0x7b everywhere
	// but a 0 at the start of every page.
	rdmaCore := func(n int) []byte {
		b := bytes.Repeat([]byte{0x7b}, n)
		for i := 0; i < n; i += page {
			b[i] = 0
		}
		return b
	}
	for _, tc := range []struct {
		name string
		buf  []byte
		want []string
	}{
		{"goroce pattern", goroce(3*page + 5), nil},
		{"rdma-core pattern", rdmaCore(3*page + 5), nil},
		{"one byte", goroce(1), nil},
		{"empty", nil, nil},
		{"goroce byte flipped", flip(goroce(2*page), page+7), []string{"invalid data at offset 4103"}},
		{"rdma-core byte flipped", flip(rdmaCore(2*page), 9), []string{"invalid data at offset 9: got 0x84, want 0x7b"}},
		{"page marker lost", flip(goroce(2*page), page), []string{"invalid data in page 1"}},
		{"no -c on the client", bytes.Repeat([]byte{0x7b}, 10), []string{"invalid data in page 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkPattern(tc.buf, page, 0x7b)
			assert.Len(t, got, len(tc.want), "%q", got)
			for i, w := range tc.want {
				if i < len(got) {
					assert.Contains(t, got[i], w)
				}
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	b[i] ^= 0xff
	return b
}

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		size, iters int
		elapsed     time.Duration
		want        string
	}{
		{4096, 1000, 1500 * time.Millisecond,
			"8192000 bytes in 1.50 seconds = 43.69 Mbit/sec\n1000 iters in 1.50 seconds = 1500.00 usec/iter\n"},
		{64, 10000, 523456 * time.Microsecond,
			"1280000 bytes in 0.52 seconds = 19.56 Mbit/sec\n10000 iters in 0.52 seconds = 52.35 usec/iter\n"},
	} {
		var out bytes.Buffer
		report(&out, tc.size, tc.iters, tc.elapsed)
		assert.Equal(t, tc.want, out.String())
	}
}
