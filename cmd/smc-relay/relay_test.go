package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/faulty"
	"github.com/goroce/goroce/smcr"
)

// chain is a TCP client's way to a TCP server through two relays, SMC-R
// between them: client → a (tcp → smc) → b (smc → tcp) → server.
type chain struct {
	entry  string // where a client connects
	a, b   *relay
	doneA  chan struct{}
	doneB  chan struct{}
	cancel context.CancelFunc
}

var nextNet atomic.Uint32

func init() { nextNet.Store(rand.Uint32N(1 << 14)) }

// freshAddrs returns a pair of loopback addresses of the test's own
// (127.(192..255).x.1 and .2): a device each.
func freshAddrs() (netip.Addr, netip.Addr) {
	n := nextNet.Add(1) % (1 << 14)
	b, c := byte(192+n>>8), byte(n)
	return netip.AddrFrom4([4]byte{127, b, c, 1}), netip.AddrFrom4([4]byte{127, b, c, 2})
}

// newChain starts the two relays towards server; faults, if set, is what
// both SMC-R devices' packets meet.
func newChain(t *testing.T, server string, faults *faulty.Config) *chain {
	t.Helper()
	var seed atomic.Uint64
	seed.Store(uint64(time.Now().UnixNano()))
	cfg := smcr.Config{Signalling: smcr.SignalConfigured, PeerSpeaksSMC: true, UEIDs: []string{"RELAY-TEST"},
		LinkGroupLinger: 20 * time.Millisecond, SendBufSize: 16 << 10, RecvBufSize: 16 << 10}
	if faults != nil {
		cfg.WrapBackend = func(b backend.Backend) backend.Backend {
			c := *faults
			c.Seed = seed.Add(1)
			return faulty.Wrap(b, c)
		}
	}
	var lnB net.Listener
	var cli netip.Addr
	var err error
	for range 50 {
		var srv netip.Addr
		srv, cli = freshAddrs()
		if lnB, err = smcr.Listen("tcp", netip.AddrPortFrom(srv, 0).String(), &cfg); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	require.NoError(t, err)
	lnA, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	log := &logger{Prog: "smc-relay", W: io.Discard}
	ch := &chain{entry: lnA.Addr().String(), cancel: cancel, doneA: make(chan struct{}), doneB: make(chan struct{}),
		a: &relay{dial: dialer(endpoint{smc: true, addr: lnB.Addr().String(), src: cli}, cfg, 10*time.Second), bufSize: 16 << 10, log: log},
		b: &relay{dial: dialer(endpoint{addr: server}, cfg, 10*time.Second), bufSize: 16 << 10, log: log},
	}
	go func() { defer close(ch.doneA); ch.a.serve(ctx, lnA, 0, 64) }()
	go func() { defer close(ch.doneB); ch.b.serve(ctx, lnB, 0, 64) }()
	t.Cleanup(func() {
		cancel()
		for _, d := range []chan struct{}{ch.doneA, ch.doneB} {
			select {
			case <-d:
			case <-time.After(60 * time.Second):
				t.Error("a relay did not stop")
			}
		}
	})
	return ch
}

// echoServer answers each connection with what it sends, then ends as
// end says: "shut" (CloseWrite after the client's EOF), "close" after
// the client's EOF, "abort" after the first byte.
func echoServer(t *testing.T, end string) (addr string, ended chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	ended = make(chan error, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := c.(*net.TCPConn)
				defer tc.Close()
				if end == "abort" {
					var b [1]byte
					_, err := io.ReadFull(tc, b[:])
					tc.SetLinger(0)
					ended <- err
					return
				}
				_, err := io.Copy(tc, tc)
				if err == nil && end == "shut" {
					err = tc.CloseWrite()
					_, _ = io.Copy(io.Discard, tc)
				}
				ended <- err
			}()
		}
	}()
	return ln.Addr().String(), ended
}

// dialEntry connects a client to the chain.
func dialEntry(t *testing.T, ch *chain) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", ch.entry, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	// A bound on a failure only: a lost end of stream fails the test
	// instead of hanging it.
	require.NoError(t, c.SetDeadline(time.Now().Add(90*time.Second)))
	return c.(*net.TCPConn)
}

// sendAndEcho writes data (then shuts writing) and reads the echo until
// EOF, both at once; it returns what came back and the read's error.
func sendAndEcho(c *net.TCPConn, data []byte) ([]byte, error) {
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		if _, werr = c.Write(data); werr == nil {
			werr = c.CloseWrite()
		}
	}()
	got, rerr := io.ReadAll(c)
	wg.Wait()
	if rerr == nil {
		rerr = werr
	}
	return got, rerr
}

func random(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Through two relays and SMC-R, echoes arrive byte-exact, under loss,
// reordering, duplication and corruption of the RoCE packets too, with
// several connections at once; the half-closes travel each way.
func TestRelayEchoUnderFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults *faulty.Config
	}{
		{"clean", nil},
		{"loss 3%", &faulty.Config{Loss: 0.03}},
		{"all at once", &faulty.Config{Loss: 0.02, Reorder: 0.05, Duplicate: 0.05, Corrupt: 0.01}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, ended := echoServer(t, "shut")
			ch := newChain(t, server, tc.faults)
			sizes := []int{1, 16 << 10, 100001, 1 << 20}
			var wg sync.WaitGroup
			for i, n := range sizes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					data := random(n, uint64(i+1))
					got, err := sendAndEcho(dialEntry(t, ch), data)
					assert.NoError(t, err, "size %d", n)
					assert.Equal(t, sha256.Sum256(data), sha256.Sum256(got), "size %d: %d bytes back of %d", n, len(got), n)
				}()
			}
			wg.Wait()
			for range sizes {
				assert.NoError(t, <-ended)
			}
		})
	}
}

// Every close order is carried: the client shuts down first and the
// server after; the server closes first while the client still sends;
// the client aborts (its reset reaches the server); the server aborts
// (its reset reaches the client).
func TestRelayCloseOrders(t *testing.T) {
	t.Run("client shuts, then the server", func(t *testing.T) {
		server, ended := echoServer(t, "shut")
		ch := newChain(t, server, nil)
		got, err := sendAndEcho(dialEntry(t, ch), []byte("hello"))
		require.NoError(t, err)
		assert.Equal(t, "hello", string(got))
		require.NoError(t, <-ended)
		assert.Zero(t, ch.a.failed.Load()+ch.b.failed.Load(), "an orderly end on both sides")
	})
	t.Run("server shuts first, the client still sends", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		served := make(chan []byte, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			c.Write([]byte("bye"))
			c.(*net.TCPConn).CloseWrite() // done writing; still reads
			b, _ := io.ReadAll(c)
			served <- b
		}()
		ch := newChain(t, ln.Addr().String(), nil)
		c := dialEntry(t, ch)
		got, err := io.ReadAll(c) // the server's half-close arrives as EOF
		require.NoError(t, err)
		assert.Equal(t, "bye", string(got))
		data := random(300000, 9)
		_, err = c.Write(data) // the other direction still flows
		require.NoError(t, err)
		require.NoError(t, c.CloseWrite())
		assert.Equal(t, sha256.Sum256(data), sha256.Sum256(<-served))
	})
	t.Run("client aborts", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		serverErr := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_, err = io.Copy(io.Discard, c)
			serverErr <- err
		}()
		ch := newChain(t, ln.Addr().String(), nil)
		c := dialEntry(t, ch)
		_, err = c.Write([]byte("some"))
		require.NoError(t, err)
		require.NoError(t, c.SetLinger(0))
		require.NoError(t, c.Close()) // RST
		err = <-serverErr
		require.Error(t, err, "the server sees the abort, not an orderly end")
		assert.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	})
	t.Run("server aborts", func(t *testing.T) {
		server, ended := echoServer(t, "abort")
		ch := newChain(t, server, nil)
		c := dialEntry(t, ch)
		_, err := c.Write([]byte("x"))
		require.NoError(t, err)
		require.NoError(t, <-ended)
		_, err = io.ReadAll(c)
		require.Error(t, err, "the client sees the abort")
		assert.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
		assert.NotZero(t, ch.a.failed.Load()+ch.b.failed.Load(), "an abort counts as a failed connection")
	})
	t.Run("no server", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		ch := newChain(t, addr, nil)
		// The relays may reset the client's connection before its
		// connect has looked at the socket's error: then the dial
		// itself fails with the reset.
		c, err := net.DialTimeout("tcp", ch.entry, 10*time.Second)
		if err != nil {
			require.ErrorIs(t, err, syscall.ECONNRESET, "a side that cannot be reached ends the other")
			return
		}
		t.Cleanup(func() { c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(90*time.Second)))
		_, err = io.ReadAll(c)
		require.Error(t, err, "a side that cannot be reached ends the other")
	})
}

// A receiver that does not read holds the sender back through both relays
// (back-pressure), rather than the relays buffering for it: the sender
// stalls after about what the buffers on the way hold, and everything
// arrives once the receiver reads.
func TestRelayBackPressure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	release := make(chan struct{})
	served := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		<-release
		b, _ := io.ReadAll(c)
		served <- b
	}()
	ch := newChain(t, ln.Addr().String(), nil)
	c := dialEntry(t, ch)
	const total = 64 << 20
	var sent atomic.Int64
	writeDone := make(chan error, 1)
	go func() {
		chunk := make([]byte, 64<<10)
		for sent.Load() < total {
			n, err := c.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				writeDone <- err
				return
			}
		}
		writeDone <- c.CloseWrite()
	}()
	// The writer must stall well short of 64 MiB: wait until it makes no
	// progress for a while (bounded in count, not in time).
	stalled := false
	last := int64(-1)
	for range 200 {
		time.Sleep(50 * time.Millisecond)
		now := sent.Load()
		if now == last && now < total {
			stalled = true
			break
		}
		last = now
	}
	require.True(t, stalled, "the writer never stalled: %d bytes sent", sent.Load())
	assert.Less(t, sent.Load(), int64(total/2), "held back, not buffered")
	close(release)
	require.NoError(t, <-writeDone)
	got := <-served
	assert.Len(t, got, int(sent.Load()))
}

var _ = bytes.Equal
var _ = fmt.Sprint
