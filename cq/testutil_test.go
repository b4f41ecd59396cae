package cq

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hangGuard is how long a test waits for something that must happen before
// declaring a hang. It bounds failures only; nothing is timed on success.
const hangGuard = 30 * time.Second

func guardCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// countEntry counts its completions and records the WRIDs it saw.
type countEntry struct {
	n    atomic.Int64
	then func(wc *WC) // optional follow-up, run inside Done
}

func (e *countEntry) Done(wc *WC) {
	e.n.Add(1)
	if e.then != nil {
		e.then(wc)
	}
}

// onceEntry must complete exactly once.
type onceEntry struct {
	fired atomic.Int32
	total *atomic.Int64
}

func (e *onceEntry) Done(*WC) {
	e.fired.Add(1)
	e.total.Add(1)
}

// waitFor blocks until cond holds, yielding in between; it fails the test
// only if cond never holds within the hang guard.
func waitFor(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			require.FailNow(t, "hang: "+what)
		}
		runtime.Gosched()
	}
}

// noPoolGoroutines waits until no goroutine runs pool code.
func noPoolGoroutines(t testing.TB) {
	t.Helper()
	ctx := guardCtx(t)
	waitFor(t, ctx, "pool goroutines to stop", func() bool {
		buf := make([]byte, 1<<20)
		s := string(buf[:runtime.Stack(buf, true)])
		return !containsAny(s, "cq.(*runQueue).work")
	})
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// push pushes wc and delivers the CQ's event as a queue pair does once it
// has released its lock.
func push(c *CQ, wc *WC, solicited bool) error {
	fired, err := c.Push(wc, solicited)
	c.Notify(fired, err)
	return err
}
