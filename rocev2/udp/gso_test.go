package udp

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/rocev2"
	"github.com/stretchr/testify/assert"
)

func TestGSORun(t *testing.T) {
	dst := netip.MustParseAddrPort("127.0.0.2:4791")
	other := netip.MustParseAddrPort("127.0.0.3:4791")
	dg := func(size int, to netip.AddrPort) rocev2.Datagram {
		return rocev2.Datagram{Buf: make([]byte, size), Addr: to}
	}
	tests := []struct {
		name    string
		pkts    []rocev2.Datagram
		maxSegs int
		want    int
	}{
		{"one", []rocev2.Datagram{dg(1000, dst)}, 64, 1},
		{"data then ACK: plain", []rocev2.Datagram{dg(92, dst), dg(32, dst)}, 64, 1},
		{"two equal: plain", []rocev2.Datagram{dg(1000, dst), dg(1000, dst)}, 64, 1},
		{"three equal", []rocev2.Datagram{dg(1000, dst), dg(1000, dst), dg(1000, dst)}, 64, 3},
		{"short last ends the run", []rocev2.Datagram{dg(1000, dst), dg(1000, dst), dg(10, dst), dg(10, dst)}, 64, 3},
		{"longer one starts the next", []rocev2.Datagram{dg(1000, dst), dg(1000, dst), dg(1000, dst), dg(2000, dst)}, 64, 3},
		{"other destination", []rocev2.Datagram{dg(1000, dst), dg(1000, dst), dg(1000, dst), dg(1000, other)}, 64, 3},
		{"cut at maxSegs", []rocev2.Datagram{dg(100, dst), dg(100, dst), dg(100, dst), dg(100, dst)}, 3, 3},
		{"cut below the minimum", []rocev2.Datagram{dg(100, dst), dg(100, dst), dg(100, dst)}, 2, 1},
		{"larger than a segment", []rocev2.Datagram{dg(9000, dst), dg(9000, dst), dg(9000, dst)}, 64, 1},
		{"byte limit", []rocev2.Datagram{dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst),
			dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst),
			dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst), dg(4096, dst)}, 64, maxGSOBytes / 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, gsoRun(tc.pkts, dst, tc.maxSegs, 8000))
		})
	}
}
