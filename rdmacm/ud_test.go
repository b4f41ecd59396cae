package rdmacm

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2/backend/memlink"
)

// SIDR: a UD service is resolved to its QP and Q_Key, and a datagram goes
// there; a refusal and a port nobody serves are reported as rdma_cm does.
func TestSIDR(t *testing.T) {
	srv, cli := memPair(t, memlink.Config{})
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr, PortSpace: cmwire.PortSpaceUDP})
	require.NoError(t, err)
	sep, err := srv.cm.NewUDEndpoint(QPConfig{})
	require.NoError(t, err)
	defer sep.Close()
	sbuf := newBuffers(t, sep.PD(), 4096)
	sbuf.postRecv(t, sep.QP(), 0, 40+64)

	answered := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err == nil {
			require.True(t, req.UD)
			require.Equal(t, "udaddy", string(req.PrivateData[:6]))
			err = req.AcceptUD(sep.QP().QPN(), 0, []byte("ok"))
		}
		answered <- err
	}()
	d := Dialer{CM: cli.cm, PrivateData: []byte("udaddy")}
	peer, err := d.DialUD(ctx, srvAddr)
	require.NoError(t, err)
	require.NoError(t, <-answered)
	require.Equal(t, sep.QP().QPN(), peer.QPN)
	require.Equal(t, uint32(UDPQKey), peer.QKey)
	require.Equal(t, "ok", string(peer.PrivateData[:2]))

	cep, err := cli.cm.NewUDEndpoint(QPConfig{})
	require.NoError(t, err)
	defer cep.Close()
	cbuf := newBuffers(t, cep.PD(), 4096)
	ah, err := qp.CreateAH(cep.PD(), peer.AH)
	require.NoError(t, err)
	copy(cbuf.buf, "datagram")
	_, err = cep.QP().PostSend([]qp.SendWR{{WRID: 1, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{{Addr: cbuf.mr.VA(), Length: 8, LKey: cbuf.mr.LKey()}}, AH: ah, RemoteQPN: peer.QPN, RemoteQKey: peer.QKey}})
	require.NoError(t, err)
	wc := waitWC(t, ctx, sep.CQ())
	require.Equal(t, cq.Success, wc.Status)
	require.Equal(t, cep.QP().QPN(), wc.SrcQP)
	require.Equal(t, "datagram", string(sbuf.buf[40:48]))

	go func() {
		req, err := l.Accept(ctx)
		if err == nil {
			err = req.Reject(nil)
		}
		answered <- err
	}()
	_, err = d.DialUD(ctx, srvAddr)
	var rej *RejectedError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, cmwire.SIDRReject, rej.SIDRStatus)
	require.ErrorIs(t, err, ErrUnreachable)
	require.NoError(t, <-answered)

	_, err = d.DialUD(ctx, netip.MustParseAddrPort("127.0.0.1:9"))
	require.ErrorAs(t, err, &rej)
	require.Equal(t, cmwire.SIDRUnsupported, rej.SIDRStatus)

	// A REQ to a UD listener and a SIDR_REQ to an RC one are refused.
	_, err = dialer(cli).Dial(ctx, srvAddr)
	require.ErrorAs(t, err, &rej)
	require.Equal(t, cmwire.RejInvalidServiceID, rej.Reason) // the TCP space's service ID: nobody there
	rc, err := srv.cm.Listen(ListenConfig{Addr: netip.MustParseAddrPort("0.0.0.0:7175"), PortSpace: cmwire.PortSpaceIB})
	require.NoError(t, err)
	defer rc.Close()
	_, err = (&Dialer{CM: cli.cm, PortSpace: cmwire.PortSpaceIB}).DialUD(ctx, netip.MustParseAddrPort("127.0.0.1:7175"))
	require.ErrorAs(t, err, &rej)
	require.Equal(t, cmwire.SIDRReject, rej.SIDRStatus)
}
