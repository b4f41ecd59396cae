package cq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
//
// Notification follows ibv_req_notify_cq: Arm requests one event for the
// next completion (or the next solicited one); the event is delivered on the
// channel returned by Events (and to the Config.OnEvent callback) and the CQ
// must be armed again for the next one.
type CQ struct {
	mu       sync.Mutex // protects everything below
	ring     []WC
	head     int // index of the oldest completion
	count    int
	armed    armState
	err      error // sticky overflow
	closed   bool
	events   chan struct{}
	done     chan struct{} // closed by Close
	onEvent  func()
	onAsync  func(error)
	overruns uint64
	pushed   uint64 // completions ever accepted (Drain's barrier)

	// Moderation (ibv_modify_cq's cq_count / cq_period): an armed CQ fires
	// once modComps completions wait, or modPeriod after the first one.
	modComps  int
	modPeriod time.Duration
	modTimer  *time.Timer
	modArmed  bool // modTimer is pending
	// modGate, if set, says whether moderation applies to a completion
	// pushed now (a pool running to completion: not inside a receive
	// batch, whose end runs the fired CQs anyway; see newManaged).
	modGate func() bool

	// progress holds the progress functions of the devices whose QPs use
	// this CQ (see AttachProgress); Poll calls them when it finds nothing.
	progress atomic.Pointer[[]Progressor]
	progMu   sync.Mutex // serializes AttachProgress
}

// Progressor is what a CQ needs of a device (rocev2/device.Device) so that
// its pollers can drive it.
type Progressor interface {
	// Progress handles waiting packets on the calling goroutine and reports
	// whether there were any. It may hold back the packets they call for
	// until its next call or Release.
	Progress() bool
	// Release sends what Progress held back.
	Release()
}

type armState uint8

const (
	disarmed armState = iota
	armedNext
	armedSolicited
)

// Config holds the optional parts of a CQ.
type Config struct {
	// OnEvent, if set, is called (without the CQ's lock) each time an armed
	// CQ fires, in addition to the signal on Events().
	OnEvent func()
	// OnAsyncError, if set, is called once when the CQ overflows
	// (IBV_EVENT_CQ_ERR).
	OnAsyncError func(error)
}

// New creates a CQ that holds depth completions.
func New(depth int, cfg Config) (*CQ, error) {
	if depth < 1 || depth > MaxDepth {
		return nil, fmt.Errorf("cq: create: depth %d out of range 1..%d", depth, MaxDepth)
	}
	return &CQ{
		ring:    make([]WC, depth),
		events:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		onEvent: cfg.OnEvent,
		onAsync: cfg.OnAsyncError,
	}, nil
}

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
// how many. It never blocks and never allocates. When the CQ is empty it
// first lets the attached devices handle packets that have arrived, on this
// goroutine, so a busy-polling application makes progress by itself.
func (c *CQ) Poll(wcs []WC) int {
	if n := c.poll(wcs); n > 0 || len(wcs) == 0 {
		return n
	}
	if p := c.progress.Load(); p != nil {
		worked := false
		for _, d := range *p {
			worked = d.Progress() || worked
		}
		if worked {
			n := c.poll(wcs)
			if n == 0 {
				// Nothing for this caller to answer: do not hold back the
				// packets the devices' Progress held for it.
				c.release()
			}
			return n
		}
	}
	return 0
}

// AttachProgress registers a device for Poll to drive when it finds the CQ
// empty; attaching the same device twice is harmless.
func (c *CQ) AttachProgress(d Progressor) {
	c.progMu.Lock()
	defer c.progMu.Unlock()
	var list []Progressor
	if p := c.progress.Load(); p != nil {
		for _, have := range *p {
			if have == d {
				return
			}
		}
		list = append(list, *p...)
	}
	list = append(list, d)
	c.progress.Store(&list)
}

// release lets the attached devices send what their Progress held back:
// the caller is about to sleep.
func (c *CQ) release() {
	if p := c.progress.Load(); p != nil {
		for _, d := range *p {
			d.Release()
		}
	}
}

func (c *CQ) poll(wcs []WC) int {
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
// completions satisfy it too. Push is for queue pairs, not applications.
func (c *CQ) Push(wc *WC, solicited bool) error {
	c.mu.Lock()
	if c.err != nil || c.closed {
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	if c.count == len(c.ring) {
		c.err = ErrOverflow
		c.overruns++
		onAsync := c.onAsync
		c.mu.Unlock()
		if onAsync != nil {
			onAsync(ErrOverflow)
		}
		return ErrOverflow
	}
	tail := c.head + c.count
	if tail >= len(c.ring) {
		tail -= len(c.ring)
	}
	c.ring[tail] = *wc
	c.count++
	c.pushed++
	fire := c.armed == armedNext || (c.armed == armedSolicited && (solicited || !wc.Status.OK()))
	if fire && c.armed == armedNext && c.modComps > 1 && c.count < c.modComps && wc.Status.OK() &&
		(c.modGate == nil || c.modGate()) {
		// Moderated: wait for more completions, but never longer than
		// the period, so a lone completion is not stranded.
		fire = false
		if !c.modArmed {
			c.modArmed = true
			c.startModTimerLocked()
		}
	}
	if fire {
		c.armed = disarmed
	}
	c.mu.Unlock()
	if fire {
		c.signal()
	}
	return nil
}

func (c *CQ) signal() {
	select {
	case c.events <- struct{}{}:
	default: // an event is already pending; events do not queue up
	}
	if c.onEvent != nil {
		c.onEvent()
	}
}

// Arm requests an event for the next completion, or with solicitedOnly for
// the next solicited or error completion. It reports whether completions are
// already waiting (IB_CQ_REPORT_MISSED_EVENTS): a caller that sees true must
// poll again, since those completions will not raise an event by themselves.
func (c *CQ) Arm(solicitedOnly bool) (missed bool) {
	c.release() // before c.mu: devices push completions under their own locks
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
		if c.modTimer != nil {
			c.modTimer.Stop()
		}
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

// SetModeration sets the event moderation of the CQ (ibv_modify_cq): an
// armed CQ raises its event once comps completions are waiting, or period
// after the first completion if fewer arrive. comps <= 1 turns moderation
// off (every completion fires an armed CQ). Error completions always fire
// at once.
func (c *CQ) SetModeration(comps int, period time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A deferred event already pending keeps its timer: it fires no later
	// than it would have, so lowering the moderation strands nothing.
	c.modComps, c.modPeriod = comps, period
}

// Moderation returns the current moderation (comps, period).
func (c *CQ) Moderation() (int, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.modComps, c.modPeriod
}

func (c *CQ) startModTimerLocked() {
	if c.modTimer == nil {
		c.modTimer = time.AfterFunc(c.modPeriod, c.modExpired)
		return
	}
	c.modTimer.Reset(c.modPeriod)
}

// modExpired delivers a deferred event: the moderation period ran out
// before enough completions arrived.
func (c *CQ) modExpired() {
	c.mu.Lock()
	c.modArmed = false
	fire := !c.closed && c.armed == armedNext && c.count > 0
	if fire {
		c.armed = disarmed
	}
	c.mu.Unlock()
	if fire {
		c.signal()
	}
}
