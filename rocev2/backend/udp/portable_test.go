//go:build linux

package udp

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/backendtest"
)

// The portable backend is what every system but Linux runs; these run it
// on Linux too, against the sendmmsg backend, so that both stay one
// protocol.

func openPortable(tb testing.TB, addr string) *Portable {
	tb.Helper()
	p, err := OpenPortable(Config{Addr: netip.MustParseAddrPort(addr)})
	require.NoError(tb, err)
	tb.Cleanup(func() { p.Close() })
	return p
}

func TestPortableBackendtest(t *testing.T) {
	p, err := OpenPortable(Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	backendtest.Run(t, p, []backend.Outgoing{{Buf: make([]byte, 32), Dst: netip.MustParseAddrPort("127.0.0.2:4791")}})
}

func TestPortableExchange(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to string
		portable [2]bool // sender, receiver
	}{
		{"portable to portable", "127.0.0.1:0", "127.0.0.2:0", [2]bool{true, true}},
		{"portable to sendmmsg", "127.0.0.1:0", "127.0.0.2:0", [2]bool{true, false}},
		{"sendmmsg (GSO) to portable", "127.0.0.1:0", "127.0.0.2:0", [2]bool{false, true}},
		{"IPv6 portable to portable", "[::1]:0", "[::1]:0", [2]bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pick := func(addr string, portable bool) backend.Backend {
				if portable {
					return openPortable(t, addr)
				}
				return open(t, Config{Addr: netip.MustParseAddrPort(addr)})
			}
			a, b := pick(tc.from, tc.portable[0]), pick(tc.to, tc.portable[1])
			rng := rand.New(rand.NewPCG(5, 6))
			sizes := []int{16, 1024, 1024, 1024, 4096, 9000, 100}
			sent := packets(t, rng, b.LocalAddr(), sizes)
			wait := startReceiving(b, len(sent), 10*time.Second)
			require.NoError(t, a.Send(sent))
			got := wait(t)
			for i, d := range got {
				require.Equal(t, sent[i].Buf, d.Buf, "packet %d", i)
				assert.Equal(t, backend.ICRCOK, d.ICRC, "packet %d", i)
				assert.Equal(t, a.LocalAddr(), d.Src, "packet %d", i)
				assert.Equal(t, sent[i].Wire.IPv4ID, d.IPv4ID, "packet %d: the IPv4 ID it was sealed for", i)
			}
		})
	}
}

func TestPortableDropsWhatItCannotSend(t *testing.T) {
	p := openPortable(t, "127.0.0.1:0")
	err := p.Send([]backend.Outgoing{
		{Buf: make([]byte, 32), Dst: netip.MustParseAddrPort("[::1]:4791")},    // the other family
		{Buf: make([]byte, 2), Dst: netip.MustParseAddrPort("127.0.0.2:4791")}, // no room for an ICRC
	})
	assert.ErrorIs(t, err, errDest)
}
