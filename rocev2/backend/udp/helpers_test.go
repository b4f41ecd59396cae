//go:build linux

package udp

import (
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/stretchr/testify/require"
)

// open opens a backend that the test closes when it ends.
func open(tb testing.TB, cfg Config) *Backend {
	tb.Helper()
	b, err := Open(cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { b.Close() })
	return b
}

// packets builds one RC SEND Only packet per size (payload bytes) to dst,
// PSN = index, with pseudo-random payloads.
func packets(tb testing.TB, rng *rand.Rand, dst netip.AddrPort, sizes []int) []backend.Outgoing {
	tb.Helper()
	out := make([]backend.Outgoing, len(sizes))
	for i, n := range sizes {
		payload := make([]byte, n)
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: rocev2.PSN(i)}
		buf, err := f.Append(nil, payload)
		require.NoError(tb, err)
		out[i] = backend.Outgoing{Buf: buf, Dst: dst}
	}
	return out
}

// receiveN receives n packets from b, copying them out of its buffers. If
// they have not all arrived within timeout, it closes b (which wakes
// Receive) and fails the test.
func receiveN(tb testing.TB, b backend.Backend, n int, timeout time.Duration) []backend.Incoming {
	tb.Helper()
	return startReceiving(b, n, timeout)(tb)
}

// startReceiving receives n packets from b on a goroutine of its own, so
// that a sender can outrun the socket buffer without losses; the function
// it returns waits for them (or the timeout, when it closes b).
func startReceiving(b backend.Backend, n int, timeout time.Duration) func(testing.TB) []backend.Incoming {
	type result struct {
		pkts     []backend.Incoming
		err      error
		timedOut bool
	}
	var timedOut atomic.Bool
	watchdog := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		b.Close()
	})
	done := make(chan result, 1)
	go func() {
		out := make([]backend.Incoming, 0, n)
		batch := make([]backend.Incoming, b.BatchSize())
		for len(out) < n {
			k, err := b.Receive(batch)
			if err != nil {
				done <- result{out, err, timedOut.Load()}
				return
			}
			for _, d := range batch[:k] {
				d.Buf = append([]byte(nil), d.Buf...)
				out = append(out, d)
			}
		}
		done <- result{pkts: out}
	}()
	return func(tb testing.TB) []backend.Incoming {
		tb.Helper()
		r := <-done
		watchdog.Stop()
		require.False(tb, r.timedOut, "timed out: received %d of %d packets", len(r.pkts), n)
		require.NoError(tb, r.err)
		return r.pkts
	}
}
