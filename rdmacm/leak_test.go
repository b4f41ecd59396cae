package rdmacm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend/memlink"
)

// settled reports whether the CM holds no connection state beyond its
// listeners' ports.
func (c *CM) settled(listeners int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids) == 0 && len(c.timed) == 0 && len(c.remoteIDs) == 0 && len(c.remoteQPNs) == 0 &&
		len(c.sidrs) == 0 && len(c.ports) == listeners
}

// Connections that come and go, are rejected, time out or are cancelled
// leave nothing behind once their timewaits end.
func TestNoStateLeft(t *testing.T) {
	srv, cli := memPair(t, memlink.Config{})
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr})
	require.NoError(t, err)
	for i := range 20 {
		done := serve(ctx, l, AcceptConfig{})
		conn, err := dialer(cli).Dial(ctx, srvAddr)
		require.NoError(t, err)
		if i%2 == 0 {
			require.NoError(t, conn.Disconnect()) // the client ends it
			waitDone(t, ctx, conn)
		}
		require.NoError(t, conn.Close())
		require.NoError(t, <-done)
	}
	go func() {
		req, err := l.Accept(ctx)
		if err == nil {
			_ = req.Reject(nil)
		}
	}()
	_, err = dialer(cli).Dial(ctx, srvAddr)
	require.Error(t, err)
	require.NoError(t, l.Close())
	_, err = dialer(cli).Dial(ctx, srvAddr)
	require.Error(t, err)
	waitFor(t, ctx, func() bool { return srv.cm.settled(0) && cli.cm.settled(0) })
}
