package main

import (
	"context"
	"runtime"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/device"
)

// poller reaps completions from a CQ. It polls up to spin times (yielding
// the processor in between) before it arms the CQ and sleeps on its event
// channel: spinning saves the wake-up latency when there are processors to
// spare, and only burns the one the device's receive loop needs when there
// are not.
type poller struct {
	cq   *device.Poller
	wcs  []cq.WC
	spin int
}

// busySpin is the default spin count: perftest's pollers busy-poll, and a
// goroce CQ poll that finds nothing drives the device's receive path itself
// (device.Poller), so the poller takes its packets without waiting for
// the receive goroutine to be scheduled. After this many empty polls (well
// a second or so) it sleeps on the CQ's event channel after all.
const busySpin = 1 << 20

// How a latency test waited for packets (result.Wait).
const (
	waitBusy   = "busy-poll"
	waitEvents = "events"
)

// spinFor returns the spin count for a test of kind: -spin when given, 0
// with -e, else busy polling for the latency test, as perftest does, and
// for bandwidth tests only with more than two CPUs. On two, a poller that
// spins takes the processor the two processes' receive paths need: WRITE
// 64 KiB measured 16 Gbit/s busy-polling and 18.6 sleeping on events, SEND
// 9–11 and 14.
func (c *config) spinFor(kind string) int {
	switch {
	case c.spin >= 0:
		return c.spin
	case c.events:
		return 0
	case kind == kindLat || runtime.NumCPU() > 2:
		return busySpin
	}
	return 0
}

func newPoller(dev *device.Device, c *cq.CQ, spin int) *poller {
	return &poller{cq: dev.NewPoller(c), wcs: make([]cq.WC, 64), spin: spin}
}

// wait returns the completions available, waiting for at least one unless
// wake is closed (or receives) first; it returns ctx's error when ctx ends.
// The slice is reused by the next call.
func (p *poller) wait(ctx context.Context, wake <-chan struct{}) ([]cq.WC, error) {
	for i := 0; ; i++ {
		if n := p.cq.Poll(p.wcs); n > 0 {
			return p.wcs[:n], nil
		}
		if i < p.spin {
			if i%64 == 63 {
				// A long spin still hears wake and ctx: a million polls take
				// seconds, and well over ten under the race detector.
				select {
				case <-wake:
					if n := p.cq.Poll(p.wcs); n > 0 {
						return p.wcs[:n], nil
					}
					return nil, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				default:
				}
				runtime.Gosched()
			}
			continue
		}
		if p.cq.Arm(false) {
			continue // completions arrived between Poll and Arm
		}
		select {
		case <-p.cq.CQ().Events():
		case <-wake:
			if n := p.cq.Poll(p.wcs); n > 0 {
				return p.wcs[:n], nil
			}
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
