package shm

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

func TestPairAndExchange(t *testing.T) {
	dir := runDir(t)
	a := openIn(t, dir, "127.0.0.1:4791", Config{})
	b := openIn(t, dir, "127.0.0.2:4791", Config{})
	const n = 100
	pkts := make([]rocev2.Datagram, n)
	for i := range pkts {
		pkts[i] = rocev2.Datagram{Buf: packet(32+i*40, byte(i)), Addr: b.LocalAddr()}
	}
	require.NoError(t, a.Send(pkts))
	got := receiveN(t, b, n)
	for i, d := range got {
		assert.Equal(t, pkts[i].Buf, d.Buf, "packet %d", i)
		assert.Equal(t, rocev2.ICRCOK, d.ICRC, "packet %d", i)
		assert.Equal(t, a.LocalAddr(), d.Addr)
	}
	assert.Equal(t, LinkShm, a.LinkTo(b.LocalAddr()))
	assert.Equal(t, LinkShm, b.LinkTo(a.LocalAddr()))
	assert.Equal(t, []netip.AddrPort{b.LocalAddr()}, a.Peers())
	// And back, on the same pairing.
	require.NoError(t, b.Send([]rocev2.Datagram{{Buf: packet(64, 7), Addr: a.LocalAddr()}}))
	back := receiveN(t, a, 1)
	assert.Equal(t, b.LocalAddr(), back[0].Addr)
	assert.EqualValues(t, 1, a.Stats().Pairings)
	assert.EqualValues(t, 1, b.Stats().Pairings)
	t.Logf("a %+v\nb %+v", a.Stats(), b.Stats())
}
