package smcr

import (
	"context"
	"sync"
)

// idle wakes WaitIdle when a stack closes: a channel closed and replaced
// on every close.
var idle struct {
	sync.Mutex
	ch chan struct{}
}

// stackClosed is called by the last release of a stack, after it is gone
// from the stacks map.
func stackClosed() {
	idle.Lock()
	if idle.ch != nil {
		close(idle.ch)
		idle.ch = nil
	}
	idle.Unlock()
}

// WaitIdle waits until the process has no goroce device open for SMC-R:
// every listener closed, every SMC-R connection closed and done closing
// with its peer, and every link group ended (after its linger,
// Config.LinkGroupLinger, with DELETE_LINK) or failed. (Fallback
// connections hold no device.) With the default linger that is within
// 15 s of the last connection's close (DefaultLinkGroupLinger). A program
// that exits after WaitIdle leaves its peers no connection or link group
// to time out. It returns ctx's error if ctx ends first.
func WaitIdle(ctx context.Context) error {
	for {
		idle.Lock()
		if idle.ch == nil {
			idle.ch = make(chan struct{})
		}
		ch := idle.ch
		idle.Unlock()
		stacks.Lock()
		n := len(stacks.m)
		stacks.Unlock()
		devices.Lock()
		n += len(devices.m) // a stack's devices close after it left the map
		devices.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
