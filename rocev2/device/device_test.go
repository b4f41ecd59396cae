package device

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
)

type recordingQP struct{ got chan uint32 }

func (r *recordingQP) HandlePacket(pkt *rocev2.Packet, dg *backend.Incoming) bool {
	r.got <- pkt.BTH().DestQP()
	return true
}

// waitCounter waits until c() reaches want.
func waitCounter(t *testing.T, c func() uint64, want uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c() < want {
		require.True(t, time.Now().Before(deadline), "counter stuck at %d, want %d", c(), want)
		runtime.Gosched()
	}
}

// Every bad packet is dropped and counted under its reason; good ones reach
// their QP.
func TestDeviceDropsAndCounts(t *testing.T) {
	network := memlink.NewNetwork()
	b, err := network.Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
	require.NoError(t, err)
	d, err := New(Config{Backend: b})
	require.NoError(t, err)
	defer d.Close()
	peer, err := network.Attach(netip.MustParseAddrPort("127.0.0.2:4791"))
	require.NoError(t, err)
	defer peer.Close()

	rec := &recordingQP{got: make(chan uint32, 16)}
	qpn, err := d.AddQP(rec)
	require.NoError(t, err)
	require.GreaterOrEqual(t, qpn, uint32(FirstQPN))
	require.Less(t, qpn, uint32(multicastQPN))

	good := func(qpn uint32, pkey uint16) []byte {
		f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: pkey, DestQP: qpn}
		p, err := f.Append(nil, []byte("hi"))
		require.NoError(t, err)
		return p
	}
	send := func(p []byte) {
		require.NoError(t, peer.Send([]backend.Outgoing{{Buf: p, Dst: d.LocalAddr()}}))
	}
	send(good(qpn, 0xffff))
	select {
	case got := <-rec.got:
		assert.Equal(t, qpn, got)
	case <-time.After(5 * time.Second):
		t.Fatal("packet not delivered")
	}
	send(good(qpn, 0x7fff)) // limited member of the default partition: accepted
	<-rec.got

	for _, tc := range []struct {
		name    string
		pkt     []byte
		counter func() uint64
	}{
		{"unknown QP", good(qpn+1, 0xffff), d.Counters.RcvdUnknownQP.Load},
		{"multicast QPN", good(0xFFFFFF, 0xffff), d.Counters.RcvdUnknownQP.Load},
		{"other partition", good(qpn, 0x8001), d.Counters.RcvdPKeyErr.Load},
		{"truncated", []byte{4, 0, 0xff, 0xff, 0, 0, 0, 0x11}, d.Counters.Dropped[rocev2.ErrShort].Load},
		{"reserved opcode", func() []byte { p := good(qpn, 0xffff); p[0] = 0x15; return p }(), d.Counters.Dropped[rocev2.ErrUnknownOpcode].Load},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.counter()
			send(tc.pkt)
			waitCounter(t, tc.counter, before+1)
			assert.Empty(t, rec.got)
		})
	}
	assert.Equal(t, uint64(2), d.Counters.RcvdPkts.Load())
	v, ok := d.Counters.Get("rcvd_truncated")
	require.True(t, ok)
	assert.Equal(t, uint64(1), v)
}

func TestDeviceGIDsAndAttributes(t *testing.T) {
	d := newTestDevice(t)
	g, err := d.GID(1)
	require.NoError(t, err)
	assert.Equal(t, "::ffff:127.0.0.1", g.String())
	assert.Equal(t, netip.MustParseAddr("127.0.0.1"), g.Addr())
	assert.Equal(t, "00000000000000000000ffff7f000001", g.Hex())
	g0, err := d.GID(0)
	require.NoError(t, err)
	assert.Equal(t, byte(0xfe), g0[0])
	_, err = d.GID(2)
	require.ErrorContains(t, err, "use 1")
	assert.Equal(t, PortActive, d.Port().State)
	assert.Equal(t, rocev2.MTU4096, d.Port().ActiveMTU)
	assert.Equal(t, MaxQP, d.Attr().MaxQP)
}
