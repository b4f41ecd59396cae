package udp

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/stretchr/testify/assert"
)

func TestGSORun(t *testing.T) {
	dst := netip.MustParseAddrPort("127.0.0.2:4791")
	other := netip.MustParseAddrPort("127.0.0.3:4791")
	dg := func(size int, to netip.AddrPort) backend.Outgoing {
		return backend.Outgoing{Buf: make([]byte, size), Dst: to}
	}
	tests := []struct {
		name    string
		pkts    []backend.Outgoing
		maxSegs int
		want    int
	}{
		{"one", []backend.Outgoing{dg(1000, dst)}, 64, 1},
		{"data then ACK: plain", []backend.Outgoing{dg(92, dst), dg(32, dst)}, 64, 1},
		{"two equal: plain", []backend.Outgoing{dg(1000, dst), dg(1000, dst)}, 64, 1},
		{"three equal", []backend.Outgoing{dg(1000, dst), dg(1000, dst), dg(1000, dst)}, 64, 3},
		{"short last ends the run", []backend.Outgoing{dg(1000, dst), dg(1000, dst), dg(10, dst), dg(10, dst)}, 64, 3},
		{"longer one starts the next", []backend.Outgoing{dg(1000, dst), dg(1000, dst), dg(1000, dst), dg(2000, dst)}, 64, 3},
		{"other destination", []backend.Outgoing{dg(1000, dst), dg(1000, dst), dg(1000, dst), dg(1000, other)}, 64, 3},
		{"cut at maxSegs", []backend.Outgoing{dg(100, dst), dg(100, dst), dg(100, dst), dg(100, dst)}, 3, 3},
		{"cut below the minimum", []backend.Outgoing{dg(100, dst), dg(100, dst), dg(100, dst)}, 2, 1},
		{"larger than a segment", []backend.Outgoing{dg(9000, dst), dg(9000, dst), dg(9000, dst)}, 64, 1},
		{"byte limit", []backend.Outgoing{dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst),
			dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst),
			dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst)}, 64, maxGSOBytes / 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, gsoRun(tc.pkts, dst, tc.maxSegs, 8000))
		})
	}
}
