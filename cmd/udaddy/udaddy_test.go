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

const serverOut = "udaddy: starting server\nreceiving data transfers\nsending replies\ndata transfers complete\ntest complete\nreturn status 0\n"
const clientOut = "udaddy: starting client\nudaddy: connecting\ninitiating data transfers\nreceiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n"

// Several UD endpoints resolved at once, both sides goroce's, over UDP on
// loopback: the original's output, line for line.
func TestUdaddyPair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := freePort(t)
	common := []string{"-c", "3", "-C", "20", "-S", "1000", "--udp-port", port, "--roce-port", port}
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
