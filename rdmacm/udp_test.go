package rdmacm

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/backend/udp"
)

// The same exchange over real UDP sockets on the loopback interface:
// two devices on ephemeral ports of 127.0.0.1, each CM told to answer the
// port a peer's MADs come from.
func TestConnectOverUDP(t *testing.T) {
	cfg := testConfig
	cfg.PeerRoCEPort = func(src netip.AddrPort) uint16 { return src.Port() }
	open := func() *node {
		be, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
		require.NoError(t, err)
		return newNode(t, be, cfg)
	}
	srv, cli := open(), open()
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	var sbuf *buffers
	accepted := make(chan *Conn, 1)
	go func() {
		req, err := l.Accept(ctx)
		require.NoError(t, err)
		c, err := req.Accept(ctx, AcceptConfig{Prepare: func(c *Conn) error {
			sbuf = newBuffers(t, c.PD(), 64)
			sbuf.postRecv(t, c.QP(), 0, 64)
			return nil
		}})
		require.NoError(t, err)
		accepted <- c
	}()
	d := dialer(cli)
	d.RoCEPort = srv.dev.LocalAddr().Port()
	conn, err := d.Dial(ctx, l.Addr())
	require.NoError(t, err)
	cbuf := newBuffers(t, conn.PD(), 64)
	copy(cbuf.buf, "over udp")
	cbuf.send(t, conn.QP(), 0, 8)
	require.Equal(t, cq.Success, waitWC(t, ctx, conn.SendCQ()).Status)
	sconn := <-accepted
	defer sconn.Close()
	require.Equal(t, cq.OpRecv, waitWC(t, ctx, sconn.RecvCQ()).Opcode)
	require.Equal(t, "over udp", string(sbuf.buf[:8]))
	require.NoError(t, conn.Disconnect())
	waitDone(t, ctx, conn)
	waitDone(t, ctx, sconn)
	require.NoError(t, conn.Close())
}
