// Package backendtest holds the checks every backend.Backend's tests run:
// udp, memlink, faulty and the capture tap (pcap) all call Run.
package backendtest

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Run runs every shared check on b, which it closes. pkts is a batch b
// could send while open.
func Run(t *testing.T, b backend.Backend, pkts []backend.Outgoing) {
	t.Helper()
	t.Run("basics", func(t *testing.T) { Basics(t, b) })
	if l, ok := b.(backend.Lendable); ok {
		t.Run("lending", func(t *testing.T) { Lending(t, l) })
	}
	t.Run("close unblocks receive", func(t *testing.T) { CloseUnblocksReceive(t, b, pkts) })
}

// Basics checks what a device reads of a backend before any packet moves.
func Basics(t *testing.T, b backend.Backend) {
	a := b.LocalAddr()
	assert.True(t, a.Addr().IsValid() && !a.Addr().IsUnspecified(), "LocalAddr %v: a specific address (the ICRC covers it)", a)
	assert.Positive(t, b.BatchSize(), "BatchSize")
	assert.GreaterOrEqual(t, b.LinkMTU(), 576, "LinkMTU")
}

// Lending checks a backend.Lendable's ServeUntil with nothing to
// receive: it returns nil when done reports true before it would sleep,
// when Interrupt is called while it sleeps, and at once after an
// Interrupt that came before it; then receiving without waiting still
// works.
func Lending(t *testing.T, b backend.Lendable) {
	t.Helper()
	buf := make([]backend.Incoming, 4)
	idle := func() bool { // takes what waits, as a device's drain: nothing
		n, _ := b.TryReceive(buf)
		return n == len(buf)
	}
	never := func() bool { return false }
	require.NoError(t, b.ServeUntil(idle, func() bool { return true }), "done at once")

	done := make(chan error, 1)
	go func() { done <- b.ServeUntil(idle, never) }()
	require.True(t, waitParked("backendtest.Lending.func", 30*time.Second), "ServeUntil never slept")
	b.Interrupt()
	select {
	case err := <-done:
		require.NoError(t, err, "interrupted while asleep")
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("Interrupt did not end a sleeping ServeUntil")
	}

	b.Interrupt()
	go func() { done <- b.ServeUntil(idle, never) }()
	select {
	case err := <-done:
		require.NoError(t, err, "interrupted before it slept")
	case <-time.After(30 * time.Second):
		t.Fatal("an Interrupt before ServeUntil was lost")
	}
	n, err := b.TryReceive(make([]backend.Incoming, 4))
	require.NoError(t, err)
	require.Zero(t, n)
}

// CloseUnblocksReceive checks that Close makes a Receive blocked on b
// return backend.ErrBackendClosed, that Receive and Send fail with it after
// Close, and that a second Close is harmless. pkts is a batch b could send
// while open. It closes b only once the receiving goroutine is parked in
// Receive, so the check is about waking a blocked receiver, not about a
// Receive that starts after Close.
func CloseUnblocksReceive(t *testing.T, b backend.Backend, pkts []backend.Outgoing) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := b.Receive(make([]backend.Incoming, 4))
		done <- err
	}()
	require.True(t, waitParked("backendtest.CloseUnblocksReceive.func1", 30*time.Second), "Receive never blocked")
	assert.NoError(t, b.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, backend.ErrBackendClosed)
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("Receive did not return after Close")
	}
	_, err := b.Receive(make([]backend.Incoming, 1))
	assert.ErrorIs(t, err, backend.ErrBackendClosed)
	assert.ErrorIs(t, b.Send(pkts), backend.ErrBackendClosed)
	assert.NoError(t, b.Close(), "second Close")
}

// waitParked waits until the goroutine whose stack contains fn is parked
// (waiting on I/O, a channel, a condition or a lock), for at most limit.
func waitParked(fn string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if !strings.Contains(g, fn) {
				continue
			}
			head, _, _ := strings.Cut(g, "\n")
			// "goroutine 7 [IO wait]:", "[sync.Cond.Wait]", "[chan receive]", ...
			if !strings.Contains(head, "[running]") && !strings.Contains(head, "[runnable]") {
				return true
			}
		}
		runtime.Gosched()
	}
	return false
}
