package rdmacm

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2/backend/memlink"
)

// A connection over the in-memory network: REQ, REP, RTU; a SEND each
// way; the client's DREQ and the server's DREP end both sides.
func TestConnectSendDisconnect(t *testing.T) {
	srv, cli := memPair(t, memlink.Config{})
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: netip.MustParseAddrPort("0.0.0.0:7174")})
	require.NoError(t, err)
	defer l.Close()

	type result struct {
		conn *Conn
		bufs *buffers
		err  error
	}
	accepted := make(chan result, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err != nil {
			accepted <- result{err: err}
			return
		}
		var bufs *buffers
		conn, err := req.Accept(ctx, AcceptConfig{PrivateData: []byte("welcome"), Prepare: func(c *Conn) error {
			bufs = newBuffers(t, c.PD(), 128)
			bufs.postRecv(t, c.QP(), 0, 64)
			return nil
		}})
		accepted <- result{conn, bufs, err}
	}()

	var cbufs *buffers
	d := Dialer{CM: cli.cm, PrivateData: []byte("hello"), Param: &ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7},
		Prepare: func(c *Conn) error {
			cbufs = newBuffers(t, c.PD(), 128)
			cbufs.postRecv(t, c.QP(), 0, 64)
			return nil
		}}
	conn, err := d.Dial(ctx, netip.MustParseAddrPort("127.0.0.1:7174"))
	require.NoError(t, err)
	defer conn.Close()
	r := <-accepted
	require.NoError(t, r.err)
	sconn := r.conn
	defer sconn.Close()

	require.Equal(t, "welcome", string(conn.PeerPrivateData()[:7]))
	require.Equal(t, "hello", string(sconn.PeerPrivateData()[:5]))
	require.Equal(t, conn.LocalAddr(), sconn.RemoteAddr())
	require.Equal(t, ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}, sconn.Param())

	copy(cbufs.buf[64:], "ping")
	cbufs.send(t, conn.QP(), 64, 4)
	wc := waitWC(t, ctx, sconn.RecvCQ())
	require.Equal(t, cq.Success, wc.Status)
	require.Equal(t, cq.OpRecv, wc.Opcode)
	require.Equal(t, "ping", string(r.bufs.buf[:4]))
	copy(r.bufs.buf[64:], "pong")
	r.bufs.send(t, sconn.QP(), 64, 4)
	for {
		wc = waitWC(t, ctx, conn.RecvCQ())
		require.Equal(t, cq.Success, wc.Status)
		if wc.Opcode == cq.OpRecv {
			break
		}
	}
	require.Equal(t, "pong", string(cbufs.buf[:4]))

	require.NoError(t, conn.Disconnect())
	waitDone(t, ctx, conn)
	waitDone(t, ctx, sconn)
	ev := <-sconn.Events()
	require.Equal(t, EventDisconnected, ev.Type)
	require.NoError(t, ev.Err)
	require.Equal(t, uint64(1), cli.cm.Counters.TxMsgs[attrIndex(cmwire.AttrREQ)].Load())
	require.Equal(t, uint64(1), srv.cm.Counters.RxMsgs[attrIndex(cmwire.AttrDREQ)].Load())
	require.Equal(t, uint64(1), cli.cm.Counters.RxMsgs[attrIndex(cmwire.AttrDREP)].Load())
}
