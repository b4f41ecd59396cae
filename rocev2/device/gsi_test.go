package device

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
)

// QP 1's packets go to the GSI handler while one is registered, and count
// as rcvd_unknown_qp otherwise; other QP numbers never reach it.
func TestGSIHandler(t *testing.T) {
	network := memlink.NewNetwork()
	b, err := network.Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
	require.NoError(t, err)
	d, err := New(Config{Backend: b})
	require.NoError(t, err)
	defer d.Close()
	peer, err := network.Attach(netip.MustParseAddrPort("127.0.0.2:4791"))
	require.NoError(t, err)
	defer peer.Close()
	send := func(qpn uint32) {
		f := rocev2.Fields{Opcode: rocev2.UDSendOnly, PKey: 0xffff, DestQP: qpn, QKey: 0x80010000, SrcQP: 1}
		p, err := f.Append(nil, make([]byte, 256))
		require.NoError(t, err)
		require.NoError(t, peer.Send([]backend.Outgoing{{Buf: p, Dst: d.LocalAddr()}}))
	}

	send(GSIQPN)
	waitCounter(t, d.Counters.RcvdUnknownQP.Load, 1)

	gsi := &recordingQP{got: make(chan uint32, 16)}
	remove, err := d.SetGSI(gsi)
	require.NoError(t, err)
	_, err = d.SetGSI(&recordingQP{})
	require.Error(t, err, "a second handler")
	send(GSIQPN)
	require.Equal(t, uint32(GSIQPN), <-gsi.got)
	send(0x12) // no QP there: not the GSI's business
	waitCounter(t, d.Counters.RcvdUnknownQP.Load, 2)

	remove()
	send(GSIQPN)
	waitCounter(t, d.Counters.RcvdUnknownQP.Load, 3)
	require.Empty(t, gsi.got)
	_, err = d.SetGSI(gsi)
	require.NoError(t, err, "free again after remove")
}
