package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cmd/internal/cmtool/cmtooltest"
)

const serverOut = "udaddy: starting server\nreceiving data transfers\nsending replies\ndata transfers complete\ntest complete\nreturn status 0\n"
const clientOut = "udaddy: starting client\nudaddy: connecting\ninitiating data transfers\nreceiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n"

// Several UD endpoints resolved at once, both sides goroce's, over UDP on
// loopback: the original's output, line for line.
func TestUdaddyPair(t *testing.T) {
	port := cmtooltest.FreePort(t)
	common := []string{"-c", "3", "-C", "20", "-S", "1000", "--udp-port", port, "--roce-port", port}
	srv, cli := cmtooltest.Pair(t, run, &listening, append([]string{"-b", "127.0.0.1"}, common...),
		append([]string{"-s", "127.0.0.1", "-b", "127.0.0.2"}, common...))
	require.Equal(t, 0, cli.Code, cli.Stdout+cli.Stderr)
	require.Equal(t, 0, srv.Code, srv.Stdout+srv.Stderr)
	require.Equal(t, clientOut, cli.Stdout)
	require.Equal(t, serverOut, srv.Stdout)
}
