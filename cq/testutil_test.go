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
		return !containsAny(s, "cq.(*runQueue).work", "cq.(*Legacy).loop")
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

// allocMode is one completion design a test runs on: how to make it (on
// the given devices, to run to completion) and how to reserve from it.
type allocMode struct {
	name    string
	new     func(devices []Device) Allocator
	reserve func(a Allocator, n int) (Reservation, error)
}

func reserveIn(pc PollContext) func(Allocator, int) (Reservation, error) {
	return func(a Allocator, n int) (Reservation, error) { return a.(*Pool).Get(n, -1, pc) }
}

var allocModes = []allocMode{
	{"softirq", func(d []Device) Allocator { return NewPool(PoolConfig{Vectors: 2, Devices: d}) }, reserveIn(PollSoftIRQ)},
	{"softirq no DIM", func(d []Device) Allocator { return NewPool(PoolConfig{Vectors: 2, NoDIM: true, Devices: d}) }, reserveIn(PollSoftIRQ)},
	{"workqueue", func(d []Device) Allocator { return NewPool(PoolConfig{Vectors: 2, Workers: 3, Devices: d}) }, reserveIn(PollWorkqueue)},
	{"legacy", func(d []Device) Allocator { return NewLegacy(LegacyConfig{Devices: d}) }, Allocator.Reserve},
}

// newAlloc makes mode's design; the test's cleanup closes it.
func newAlloc(t testing.TB, mode allocMode, devices ...Device) Allocator {
	a := mode.new(devices)
	t.Cleanup(func() { a.Close() })
	return a
}
