package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cmd/internal/cmtool/cmtooltest"
)

const serverOut = "cmatose: starting server\ninitiating data transfers\ncompleting sends\nreceiving data transfers\n" +
	"data transfers complete\ncmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0\n"
const clientOut = "cmatose: starting client\ncmatose: connecting\nreceiving data transfers\nsending replies\n" +
	"data transfers complete\ntest complete\nreturn status 0\n"

// Several connections at once, both sides goroce's, over UDP on
// loopback: the original's output, line for line.
func TestUcmatosePair(t *testing.T) {
	port := cmtooltest.FreePort(t)
	common := []string{"-c", "5", "-C", "20", "-S", "1000", "-p", "7471", "--udp-port", port, "--roce-port", port}
	srv, cli := cmtooltest.Pair(t, run, &listening, append([]string{"-b", "127.0.0.1"}, common...),
		append([]string{"-s", "127.0.0.1", "-b", "127.0.0.2"}, common...))
	require.Equal(t, 0, cli.Code, cli.Stdout+cli.Stderr)
	require.Equal(t, 0, srv.Code, srv.Stdout+srv.Stderr)
	require.Equal(t, clientOut, cli.Stdout)
	require.Equal(t, serverOut, srv.Stdout)
}

// Nobody listens: REJ reason 8, "return status 8".
func TestUcmatoseRejected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := cmtooltest.FreePort(t)
	var so, se, a, b cmtooltest.SyncBuf
	sctx, stop := context.WithCancel(ctx)
	// A server on the device that listens on another port: -p 1.
	done := cmtooltest.StartServer(t, sctx, run, &listening,
		[]string{"-b", "127.0.0.1", "-p", "1", "--udp-port", port, "--roce-port", port}, &a, &b)
	code := run(ctx, []string{"-s", "127.0.0.1", "-b", "127.0.0.2", "-p", "2", "--udp-port", port, "--roce-port", port}, &so, &se)
	require.Equal(t, 8, code)
	require.Contains(t, so.String(), "cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8\n")
	require.Contains(t, so.String(), "return status 8\n")
	stop()
	<-done
}
