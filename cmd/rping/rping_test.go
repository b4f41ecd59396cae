package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuf is a bytes.Buffer two goroutines may write.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort returns a UDP port free on both loopback addresses.
func freePort(t *testing.T) string {
	t.Helper()
	for range 20 {
		a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("127.0.0.1")})
		require.NoError(t, err)
		port := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP("127.0.0.2"), Port: port})
		a.Close()
		if err == nil {
			b.Close()
			return strconv.Itoa(port)
		}
	}
	t.Fatal("no UDP port free on 127.0.0.1 and 127.0.0.2")
	return ""
}

type result struct {
	code           int
	stdout, stderr string
}

// pair runs an rping server and client over UDP on loopback.
func pair(t *testing.T, srvArgs, cliArgs []string) (srv, cli result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := freePort(t)
	rport := strconv.Itoa(7000 + int(time.Now().UnixNano()%2000))
	common := []string{"-p", rport, "--udp-port", port, "--roce-port", port}
	var so, se, co, ce syncBuf
	done := startServer(t, ctx, append(append([]string{"-s", "-a", "127.0.0.1"}, common...), srvArgs...), &so, &se)
	c := run(ctx, append(append([]string{"-c", "-a", "127.0.0.1", "-I", "127.0.0.2"}, common...), cliArgs...), &co, &ce)
	s := <-done
	return result{s, so.String(), se.String()}, result{c, co.String(), ce.String()}
}

// startServer runs an rping server and returns once it listens (a REQ
// before that would meet REJ for no listener); its exit status comes on
// the channel.
func startServer(t *testing.T, ctx context.Context, args []string, stdout, stderr *syncBuf) chan int {
	t.Helper()
	up := make(chan struct{})
	listening = func() { close(up) }
	t.Cleanup(func() { listening = nil })
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, stderr) }()
	select {
	case <-up:
	case code := <-done:
		t.Fatalf("the server exited with %d: %s", code, stderr.String())
	case <-ctx.Done():
		t.Fatal("the server did not start")
	}
	return done
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
			require.Equal(t, 0, cli.code, cli.stderr)
			require.Equal(t, 0, srv.code, srv.stderr)
			require.Equal(t, pingLines("ping data: ", 3, size), cli.stdout)
			require.Equal(t, pingLines("server ping data: ", 3, size), srv.stdout)
			require.Equal(t, "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n", srv.stderr)
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
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	// A server on the device that listens on another port: rping -p 1.
	var a, b, so, se syncBuf
	done := startServer(t, ctx, []string{"-s", "-a", "127.0.0.1", "-p", "1", "--udp-port", port, "--roce-port", port}, &a, &b)
	code := run(context.Background(), []string{"-c", "-a", "127.0.0.1", "-I", "127.0.0.2", "-p", "2",
		"--udp-port", port, "--roce-port", port}, &so, &se)
	require.Equal(t, exitFail, code)
	require.Contains(t, se.String(), "cma event RDMA_CM_EVENT_REJECTED, error 8\n")
	cancel()
	require.Equal(t, exitFail, <-done) // interrupted while it waited for a client
}
