package cq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// MaxDepth is the largest CQ goroce creates (rxe's max_cqe).
const MaxDepth = 32767

// ErrOverflow is reported (to Push's caller and as an async event) when a
// completion arrives at a full CQ. The CQ is then in error: like a hardware
// CQ overrun, later pushes fail too, so no completion ever vanishes unnoticed.
var ErrOverflow = errors.New("cq: overflow: completion queue full (poll faster or create it deeper)")

// ErrClosed is returned by Wait after Close.
var ErrClosed = errors.New("cq: closed")

// CQ is a completion queue: a bounded ring of work completions filled by the
// device's queue pairs and drained by Poll. A CQ may be shared by many QPs.
// It knows nothing of devices, pollers or moderation: whoever drives it
// (an application's poll loop, device.Poller, a pool's runner) does that.
//
// Notification follows ibv_req_notify_cq: Arm requests one event for the
// next completion (or the next solicited one); the event is delivered on the
// channel returned by Events (and to the Config.OnEvent callback) and the CQ
// must be armed again for the next one.
//
// Push and Notify are split so that an event never runs its callbacks under
// the pusher's locks: a queue pair pushes under its own lock and calls
// Notify with what Push returned once it has released it (an OnEvent that
// posts to the same QP would otherwise deadlock).
type CQ struct {
	id       uint32     // the CQ's number (cqn), for resource views
	mu       sync.Mutex // protects everything below
	ring     []WC
	head     int // index of the oldest completion
	count    int
	armed    armState
	err      error // sticky overflow
	reported bool  // the overflow went to OnAsyncError
	closed   bool
	events   chan struct{}
	done     chan struct{} // closed by Close
	onEvent  func()
	onAsync  func(error)
	overruns uint64
	pushed   uint64 // completions ever accepted (Drain's barrier)
}

type armState uint8

const (
	disarmed armState = iota
	armedNext
	armedSolicited
)

// Config holds the optional parts of a CQ.
type Config struct {
	// OnEvent, if set, is called each time an armed CQ fires, in addition
	// to the signal on Events(), by whoever calls Notify, with no lock of
	// the CQ or of its queue pairs held.
	OnEvent func()
	// OnAsyncError, if set, is called once when the CQ overflows
	// (IBV_EVENT_CQ_ERR), the same way.
	OnAsyncError func(error)
}

// New creates a CQ that holds depth completions.
func New(depth int, cfg Config) (*CQ, error) {
	if depth < 1 || depth > MaxDepth {
		return nil, fmt.Errorf("cq: create: depth %d out of range 1..%d", depth, MaxDepth)
	}
	return &CQ{
		id:      cqSeq.Add(1),
		ring:    make([]WC, depth),
		events:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		onEvent: cfg.OnEvent,
		onAsync: cfg.OnAsyncError,
	}, nil
}

// cqSeq numbers the process's CQs: a CQ is no device's object (it may
// serve QPs of several), so its number is the process's.
var cqSeq atomic.Uint32

// ID returns the CQ's number, unique in the process (rdma res show cq's
// cqn).
func (c *CQ) ID() uint32 { return c.id }

// Depth returns the number of completions the CQ holds.
func (c *CQ) Depth() int { return len(c.ring) }

// Len returns the number of completions waiting to be polled.
func (c *CQ) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// Err returns ErrOverflow once the CQ has overflowed.
func (c *CQ) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Poll moves up to len(wcs) completions, oldest first, into wcs and returns
// how many. It never blocks and never allocates. (It does not make the
// device receive: a goroutine that busy-polls uses device.Poller for that.)
func (c *CQ) Poll(wcs []WC) int {
	c.mu.Lock()
	n := min(len(wcs), c.count)
	for i := 0; i < n; i++ {
		wcs[i] = c.ring[c.head]
		c.ring[c.head] = WC{} // drop the Entry reference
		c.head++
		if c.head == len(c.ring) {
			c.head = 0
		}
	}
	c.count -= n
	c.mu.Unlock()
	return n
}

// Push appends a completion. solicited marks a completion that satisfies a
// solicited-only arm (a receive of a message with the SE bit); error
// completions satisfy it too. It reports whether the CQ fired (it was armed
// for this completion) and fails with ErrOverflow on a full CQ (which stays
// in error) or ErrClosed. Hand both results to Notify once no lock the
// callbacks may need is held. Push is for queue pairs, not applications.
func (c *CQ) Push(wc *WC, solicited bool) (fired bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false, c.err
	}
	if c.closed {
		return false, ErrClosed
	}
	if c.count == len(c.ring) {
		c.err = ErrOverflow
		c.overruns++
		return false, ErrOverflow
	}
	tail := c.head + c.count
	if tail >= len(c.ring) {
		tail -= len(c.ring)
	}
	c.ring[tail] = *wc
	c.count++
	c.pushed++
	fired = c.armed == armedNext || (c.armed == armedSolicited && (solicited || !wc.Status.OK()))
	if fired {
		c.armed = disarmed
	}
	return fired, nil
}

// Notify delivers what Push returned: the event when the CQ fired, and the
// first overflow to OnAsyncError. Call it without holding locks that
// OnEvent or OnAsyncError may need.
func (c *CQ) Notify(fired bool, err error) {
	if fired {
		select {
		case c.events <- struct{}{}:
		default: // an event is already pending; events do not queue up
		}
		if c.onEvent != nil {
			c.onEvent()
		}
	}
	if err == ErrOverflow && c.onAsync != nil {
		c.mu.Lock()
		first := !c.reported
		c.reported = true
		c.mu.Unlock()
		if first {
			c.onAsync(ErrOverflow)
		}
	}
}

// Arm requests an event for the next completion, or with solicitedOnly for
// the next solicited or error completion. It reports whether completions are
// already waiting (IB_CQ_REPORT_MISSED_EVENTS): a caller that sees true must
// poll again, since those completions will not raise an event by themselves.
func (c *CQ) Arm(solicitedOnly bool) (missed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if solicitedOnly {
		// A solicited arm never weakens a pending "next" arm.
		if c.armed != armedNext {
			c.armed = armedSolicited
		}
	} else {
		c.armed = armedNext
	}
	return c.count > 0
}

// Events returns the channel on which armed events are signalled (the
// ibv_comp_channel of this CQ). At most one event is pending at a time.
func (c *CQ) Events() <-chan struct{} { return c.events }

// Wait blocks until the next event (arm first), until ctx ends, or until
// the CQ is closed.
func (c *CQ) Wait(ctx context.Context) error {
	select {
	case <-c.events:
		return nil
	case <-c.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close releases the CQ; waiters return ErrClosed and later pushes fail.
func (c *CQ) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	return nil
}

// Pushed returns how many completions the CQ has accepted since it was
// created. Together with a count of handled completions it gives a drain
// barrier: everything pushed before the call has been handled once the
// handled count reaches it.
func (c *CQ) Pushed() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pushed
}
