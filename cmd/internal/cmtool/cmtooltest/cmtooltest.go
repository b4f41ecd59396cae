// Package cmtooltest has what the RDMA CM tools' tests share: an output
// buffer two goroutines write, a UDP port free on both loopback addresses
// the tests' devices bind, and a server and client run in turn.
package cmtooltest

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SyncBuf is a bytes.Buffer two goroutines may write.
type SyncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreePort returns a UDP port free on 127.0.0.1 and 127.0.0.2, as the
// tools' --udp-port takes it.
func FreePort(t *testing.T) string {
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

// Run is a tool's run: its arguments and output streams to its exit
// status.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Result is one side's exit status and output.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// StartServer runs a server and returns once it listens (listening, the
// tool's hook, is called then: a request before that would meet a REJ
// for no listener); its exit status comes on the channel.
func StartServer(t *testing.T, ctx context.Context, run Run, listening *func(), args []string, stdout, stderr *SyncBuf) chan int {
	t.Helper()
	up := make(chan struct{})
	*listening = func() { close(up) }
	t.Cleanup(func() { *listening = nil })
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, stderr) }()
	select {
	case <-up:
	case code := <-done:
		t.Fatalf("the server exited with %d: %s%s", code, stdout.String(), stderr.String())
	case <-ctx.Done():
		t.Fatal("the server did not start")
	}
	return done
}

// Pair runs a server, then a client once the server listens, and waits
// for both (at most a minute).
func Pair(t *testing.T, run Run, listening *func(), srvArgs, cliArgs []string) (srv, cli Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var so, se, co, ce SyncBuf
	done := StartServer(t, ctx, run, listening, srvArgs, &so, &se)
	c := run(ctx, cliArgs, &co, &ce)
	s := <-done
	return Result{s, so.String(), se.String()}, Result{c, co.String(), ce.String()}
}
