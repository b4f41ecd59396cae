package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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

const serverOut = "cmatose: starting server\ninitiating data transfers\ncompleting sends\nreceiving data transfers\n" +
	"data transfers complete\ncmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0\n"
const clientOut = "cmatose: starting client\ncmatose: connecting\nreceiving data transfers\nsending replies\n" +
	"data transfers complete\ntest complete\nreturn status 0\n"

// Several connections at once, both sides goroce's, over UDP on
// loopback: the original's output, line for line.
func TestUcmatosePair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := freePort(t)
	common := []string{"-c", "5", "-C", "20", "-S", "1000", "-p", "7471", "--udp-port", port, "--roce-port", port}
	var so, se, co, ce syncBuf
	up := make(chan struct{})
	listening = func() { close(up) }
	defer func() { listening = nil }()
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"-b", "127.0.0.1"}, common...), &so, &se) }()
	select {
	case <-up:
	case code := <-done:
		t.Fatalf("server exited with %d: %s%s", code, so.String(), se.String())
	}
	code := run(ctx, append([]string{"-s", "127.0.0.1", "-b", "127.0.0.2"}, common...), &co, &ce)
	require.Equal(t, 0, code, co.String()+ce.String())
	require.Equal(t, 0, <-done, so.String()+se.String())
	require.Equal(t, clientOut, co.String())
	require.Equal(t, serverOut, so.String())
}

// Nobody listens: REJ reason 8, "return status 8".
func TestUcmatoseRejected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := freePort(t)
	var so, se syncBuf
	up := make(chan struct{})
	listening = func() { close(up) }
	defer func() { listening = nil }()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, []string{"-b", "127.0.0.1", "-p", "1", "--udp-port", port, "--roce-port", port}, &syncBuf{}, &syncBuf{})
	}()
	<-up
	code := run(ctx, []string{"-s", "127.0.0.1", "-b", "127.0.0.2", "-p", "2", "--udp-port", port, "--roce-port", port}, &so, &se)
	require.Equal(t, 8, code)
	require.Contains(t, so.String(), "cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8\n")
	require.Contains(t, so.String(), "return status 8\n")
	stop()
	<-done
}
