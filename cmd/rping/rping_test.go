package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cmd/internal/cmtool/cmtooltest"
)

// pair runs an rping server and client over UDP on loopback.
func pair(t *testing.T, srvArgs, cliArgs []string) (srv, cli cmtooltest.Result) {
	t.Helper()
	port := cmtooltest.FreePort(t)
	rport := strconv.Itoa(7000 + int(time.Now().UnixNano()%2000))
	common := []string{"-p", rport, "--udp-port", port, "--roce-port", port}
	return cmtooltest.Pair(t, run, &listening,
		append(append([]string{"-s", "-a", "127.0.0.1"}, common...), srvArgs...),
		append(append([]string{"-c", "-a", "127.0.0.1", "-I", "127.0.0.2"}, common...), cliArgs...))
}

func pingLines(prefix string, n, size int) string {
	var sb strings.Builder
	start := byte(65)
	for i := range n {
		b := []byte("rdma-ping-" + strconv.Itoa(i) + ": ")
		c := start
		for len(b) < size-1 {
			b = append(b, c)
			if c++; c > 122 {
				c = 65
			}
		}
		if start++; start > 122 {
			start = 65
		}
		sb.WriteString(prefix + string(b) + "\n")
	}
	return sb.String()
}

// The output of the kernel's rping (conformance/testdata/rxe/rping.txt),
// line for line.
func TestRpingPair(t *testing.T) {
	for _, size := range []int{64, 65000} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			s := strconv.Itoa(size)
			srv, cli := pair(t, []string{"-v", "-C", "3", "-S", s}, []string{"-v", "-V", "-C", "3", "-S", s})
			require.Equal(t, 0, cli.Code, cli.Stderr)
			require.Equal(t, 0, srv.Code, srv.Stderr)
			require.Equal(t, pingLines("ping data: ", 3, size), cli.Stdout)
			require.Equal(t, pingLines("server ping data: ", 3, size), srv.Stdout)
			require.Equal(t, "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n", srv.Stderr)
		})
	}
}

func TestRpingUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		out  string
	}{
		{[]string{}, "rping -s [-vVd]"},
		{[]string{"-x"}, "rping -s [-vVd]"},
		{[]string{"-c", "-S", "10"}, "Invalid size 10 (valid range is 26 to 65536)"},
	} {
		var so, se bytes.Buffer
		require.Equal(t, exitUsage, run(context.Background(), c.args, &so, &se))
		require.Contains(t, so.String()+se.String(), c.out)
	}
}

// No listener: the kernel's REJ reason 8, as rping prints it.
func TestRpingRejected(t *testing.T) {
	port := cmtooltest.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	// A server on the device that listens on another port: rping -p 1.
	var a, b, so, se cmtooltest.SyncBuf
	done := cmtooltest.StartServer(t, ctx, run, &listening, []string{"-s", "-a", "127.0.0.1", "-p", "1", "--udp-port", port, "--roce-port", port}, &a, &b)
	code := run(context.Background(), []string{"-c", "-a", "127.0.0.1", "-I", "127.0.0.2", "-p", "2",
		"--udp-port", port, "--roce-port", port}, &so, &se)
	require.Equal(t, exitFail, code)
	require.Contains(t, se.String(), "cma event RDMA_CM_EVENT_REJECTED, error 8\n")
	cancel()
	require.Equal(t, exitFail, <-done) // interrupted while it waited for a client
}
