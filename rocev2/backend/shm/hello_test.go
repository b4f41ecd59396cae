package shm

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []hello{
		{instance: 42, from: netip.MustParseAddrPort("127.0.0.1:4791"), to: netip.MustParseAddrPort("127.0.0.2:4791"), ringSize: 1 << 22, maxPacket: maxPacket},
		{status: statusBusy, instance: 1, from: netip.MustParseAddrPort("[::1]:4791"), to: netip.MustParseAddrPort("[fd00::2]:9")},
	} {
		var b [helloLen]byte
		h.encode(&b)
		got, err := decodeHello(b[:])
		require.NoError(t, err)
		assert.Equal(t, h, got)
	}
}

func TestHelloRefusals(t *testing.T) {
	good := hello{from: netip.MustParseAddrPort("127.0.0.1:4791"), to: netip.MustParseAddrPort("127.0.0.2:4791")}
	var b [helloLen]byte
	good.encode(&b)
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"cut short", func(b []byte) []byte { return b[:helloLen-1] }, errHelloShort},
		{"empty", func(b []byte) []byte { return nil }, errHelloShort},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }, errHelloMagic},
		{"version", func(b []byte) []byte { b[8] = 2; return b }, errHelloVersion},
		{"family", func(b []byte) []byte { b[24+18] = 5; return b }, errHelloAddr},
		{"IPv6 that is IPv4", func(b []byte) []byte { b[24+18] = 6; return b }, errHelloAddr},
		{"port 0", func(b []byte) []byte { b[44+16], b[44+17] = 0, 0; return b }, errHelloAddr},
		{"unspecified", func(b []byte) []byte { clear(b[44+12 : 44+16]); return b }, errHelloAddr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := b
			_, err := decodeHello(tc.edit(c[:]))
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

// FuzzHello: whatever a peer sends as its hello decodes to an error or to
// a hello that encodes back to the same fields.
func FuzzHello(f *testing.F) {
	var b [helloLen]byte
	(&hello{from: netip.MustParseAddrPort("127.0.0.1:4791"), to: netip.MustParseAddrPort("127.0.0.2:4791"), ringSize: 1 << 20}).encode(&b)
	f.Add(b[:])
	f.Add([]byte("goroceSH"))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := decodeHello(in)
		if err != nil {
			return
		}
		var out [helloLen]byte
		h.encode(&out)
		again, err := decodeHello(out[:])
		require.NoError(t, err)
		require.Equal(t, h, again)
	})
}
