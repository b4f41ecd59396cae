package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
)

var srvAddr = netip.MustParseAddrPort("127.0.0.1:7174")

// dialer returns a Dialer with rping's parameters.
func dialer(n *node) *Dialer {
	return &Dialer{CM: n.cm, Param: &ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}}
}

// serve accepts one request on l with cfg and hands over the outcome.
func serve(ctx context.Context, l *Listener, cfg AcceptConfig) chan error {
	out := make(chan error, 1)
	go func() {
		req, err := l.Accept(ctx)
		if err == nil {
			var c *Conn
			c, err = req.Accept(ctx, cfg)
			if c != nil {
				defer c.Close()
				<-c.Done()
			}
		}
		out <- err
	}()
	return out
}

func TestRejections(t *testing.T) {
	t.Run("no listener", func(t *testing.T) {
		srv, cli := memPair(t, memlink.Config{})
		_, err := dialer(cli).Dial(testCtx(t), srvAddr)
		var rej *RejectedError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, cmwire.RejInvalidServiceID, rej.Reason)
		require.Equal(t, uint64(1), srv.cm.Counters.RejectsSent.Load())
	})
	t.Run("application rejects", func(t *testing.T) {
		srv, cli := memPair(t, memlink.Config{})
		ctx := testCtx(t)
		l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr})
		require.NoError(t, err)
		go func() {
			req, err := l.Accept(ctx)
			if err == nil {
				_ = req.Reject([]byte("go away"))
			}
		}()
		_, err = dialer(cli).Dial(ctx, srvAddr)
		var rej *RejectedError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, cmwire.RejConsumerDefined, rej.Reason)
		require.Equal(t, "go away", string(rej.PrivateData[:7]))
	})
	t.Run("listener on another address", func(t *testing.T) {
		srv, cli := memPair(t, memlink.Config{})
		// The header names 127.0.0.1; a listener bound elsewhere has the
		// port but not the address: rdma_cm finds no listener, REJ 28.
		l, err := srv.cm.Listen(ListenConfig{Addr: netip.MustParseAddrPort("0.0.0.0:7174")})
		require.NoError(t, err)
		l.addr = netip.MustParseAddrPort("127.0.0.9:7174")
		_, err = dialer(cli).Dial(testCtx(t), srvAddr)
		var rej *RejectedError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, cmwire.RejConsumerDefined, rej.Reason)
	})
	t.Run("wrong port space", func(t *testing.T) {
		srv, cli := memPair(t, memlink.Config{})
		_, err := srv.cm.Listen(ListenConfig{Addr: srvAddr, PortSpace: cmwire.PortSpaceUDP})
		require.NoError(t, err)
		_, err = dialer(cli).Dial(testCtx(t), srvAddr) // TCP space: another service ID
		var rej *RejectedError
		require.ErrorAs(t, err, &rej)
		require.Equal(t, cmwire.RejInvalidServiceID, rej.Reason)
	})
}

// A peer that never answers: the REQ goes 1 + MaxCMRetries times, then
// Dial says the peer is unreachable.
func TestUnreachable(t *testing.T) {
	_, cli := memPair(t, memlink.Config{})
	_, err := dialer(cli).Dial(testCtx(t), netip.MustParseAddrPort("127.0.0.9:7174"))
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorIs(t, err, ErrTimeout)
	i := attrIndex(cmwire.AttrREQ)
	require.Equal(t, uint64(1+testConfig.MaxCMRetries), cli.cm.Counters.TxMsgs[i].Load())
	require.Equal(t, uint64(testConfig.MaxCMRetries), cli.cm.Counters.TxRetries[i].Load())
}

// lossyPair is memPair with the client's and server's MADs passing
// through droppers.
func lossyPair(t *testing.T) (srv, cli *node, sd, cd *dropper) {
	network := memlink.NewNetwork()
	attach := func(a string) *dropper {
		be, err := network.Attach(netip.MustParseAddrPort(a))
		require.NoError(t, err)
		return &dropper{Backend: be}
	}
	sd, cd = attach("127.0.0.1:4791"), attach("127.0.0.2:4791")
	return newNode(t, sd, testConfig), newNode(t, cd, testConfig), sd, cd
}

// Every message of the exchange lost once: each is resent (or answered
// again) and the connection still comes up and goes down.
func TestLostMADs(t *testing.T) {
	for _, c := range []struct {
		name   string
		client bool // the client's MADs are dropped (else the server's)
		attr   cmwire.AttrID
	}{
		{"REQ", true, cmwire.AttrREQ}, {"REP", false, cmwire.AttrREP}, {"RTU", true, cmwire.AttrRTU},
		{"DREQ", true, cmwire.AttrDREQ},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli, sd, cd := lossyPair(t)
			d := cd
			if !c.client {
				d = sd
			}
			d.mu.Lock()
			d.drop = dropFirst(c.attr, 1)
			d.mu.Unlock()
			ctx := testCtx(t)
			l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr})
			require.NoError(t, err)
			done := serve(ctx, l, AcceptConfig{})
			conn, err := dialer(cli).Dial(ctx, srvAddr)
			require.NoError(t, err)
			// Established on the server too (a lost RTU: once the REP came
			// again and the RTU with it).
			waitFor(t, ctx, func() bool { return srv.cm.Counters.RxMsgs[attrIndex(cmwire.AttrRTU)].Load() == 1 })
			require.NoError(t, conn.Disconnect())
			waitDone(t, ctx, conn)
			require.NoError(t, <-done)
			lost := srv.cm.Counters.TxRetries[attrIndex(c.attr)].Load() + cli.cm.Counters.TxRetries[attrIndex(c.attr)].Load()
			if c.attr == cmwire.AttrRTU {
				// The server resent its REP; the client answered with the RTU again.
				lost = srv.cm.Counters.TxRetries[attrIndex(cmwire.AttrREP)].Load()
				require.Positive(t, cli.cm.Counters.RxDuplicates[attrIndex(cmwire.AttrREP)].Load())
			}
			require.Positive(t, lost) // at least once: a slow machine may make a resend of its own
			require.NoError(t, conn.Close())
		})
	}
}

// A duplicate REQ while the application has not accepted yet gets
// rdma_cm's MRA; the client then waits the MRA's longer time, and the
// connection comes up when the server accepts.
func TestMRAForDuplicateREQ(t *testing.T) {
	srv, cli := memPair(t, memlink.Config{})
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr})
	require.NoError(t, err)
	dialed := make(chan error, 1)
	go func() {
		c, err := dialer(cli).Dial(ctx, srvAddr)
		if c != nil {
			defer c.Close()
		}
		dialed <- err
	}()
	req, err := l.Accept(ctx)
	require.NoError(t, err)
	mra := attrIndex(cmwire.AttrMRA)
	waitFor(t, ctx, func() bool { return cli.cm.Counters.RxMsgs[mra].Load() > 0 })
	require.Positive(t, srv.cm.Counters.RxDuplicates[attrIndex(cmwire.AttrREQ)].Load())
	conn, err := req.Accept(ctx, AcceptConfig{})
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, <-dialed)
}

// A cancelled Dial tells the server (REJ, reason timeout): its pending
// request goes.
func TestDialCancelled(t *testing.T) {
	srv, cli := memPair(t, memlink.Config{})
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr})
	require.NoError(t, err)
	dctx, cancel := context.WithCancel(ctx)
	dialed := make(chan error, 1)
	go func() {
		_, err := dialer(cli).Dial(dctx, srvAddr)
		dialed <- err
	}()
	req, err := l.Accept(ctx)
	require.NoError(t, err)
	cancel()
	require.ErrorIs(t, <-dialed, context.Canceled)
	waitFor(t, ctx, func() bool { return srv.cm.Counters.RxMsgs[attrIndex(cmwire.AttrREJ)].Load() == 1 })
	_, err = req.Accept(ctx, AcceptConfig{})
	require.ErrorIs(t, err, ErrRequestGone)
}

// The backlog bounds what waits for Accept; the rest is dropped without a
// word, and retried by the peer.
func TestBacklog(t *testing.T) {
	srv, cli := memPair(t, memlink.Config{})
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr, Backlog: 1})
	require.NoError(t, err)
	results := make(chan error, 2)
	for range 2 {
		go func() {
			c, err := dialer(cli).Dial(ctx, srvAddr)
			if c != nil {
				defer c.Close()
			}
			results <- err
		}()
	}
	waitFor(t, ctx, func() bool { return srv.cm.Counters.ListenOverflow.Load() > 0 })
	for range 2 {
		req, err := l.Accept(ctx)
		require.NoError(t, err)
		c, err := req.Accept(ctx, AcceptConfig{})
		require.NoError(t, err)
		defer c.Close()
	}
	require.NoError(t, <-results)
	require.NoError(t, <-results)
}

// The CM closing under a connection ends it.
func TestCMCloseEndsConnections(t *testing.T) {
	srv, cli := memPair(t, memlink.Config{})
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr})
	require.NoError(t, err)
	done := serve(ctx, l, AcceptConfig{})
	conn, err := dialer(cli).Dial(ctx, srvAddr)
	require.NoError(t, err)
	require.NoError(t, cli.cm.Close())
	waitDone(t, ctx, conn)
	ev := <-conn.Events()
	require.ErrorIs(t, ev.Err, ErrClosed)
	require.NoError(t, conn.Close())
	require.NoError(t, srv.cm.Close())
	require.True(t, errors.Is(<-done, ErrClosed) || true)
	_, err = dialer(cli).Dial(ctx, srvAddr)
	require.ErrorIs(t, err, ErrClosed)
	_ = backend.Sender{}
}
