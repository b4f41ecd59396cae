package device

import "github.com/goroce/goroce/cq"

// Poller is how a goroutine busy-polls a CQ whose queue pairs live on this
// device, as a verbs application calls ibv_poll_cq in a loop. When the CQ
// is empty, Poll receives on the calling goroutine (Device.progress)
// instead of waiting for the receive goroutine to be scheduled, which with
// every processor spinning can take a scheduler time slice. And when that
// yields completions, the ACKs the received packets call for are held until
// the poller's next call, so that its reply (a post) leaves first and both
// go in one system call: on a ping-pong the ACK's send is off the critical
// path. A Poller has no state of its own; any number may poll one device.
//
// The hold ends at the caller's next call on the device: a post, Poll
// (whatever it finds), Arm, Release, or Close; at a Poll or Arm on another
// device of the process (the goroutine may have moved on: holders.go); and
// by the backstop (HoldLimit) should none of those come. Call Arm (not the
// CQ's) before sleeping on the CQ's events, or Release when you stop
// polling.
type Poller struct {
	dev *Device
	cq  *cq.CQ
}

// NewPoller returns a Poller of c on d.
func (d *Device) NewPoller(c *cq.CQ) *Poller { return &Poller{dev: d, cq: c} }

// CQ returns the polled CQ.
func (p *Poller) CQ() *cq.CQ { return p.cq }

// Poll moves up to len(wcs) completions into wcs and returns how many,
// receiving waiting packets first when the CQ is empty. It never blocks.
func (p *Poller) Poll(wcs []cq.WC) int {
	if n := p.cq.Poll(wcs); n > 0 || len(wcs) == 0 {
		return n
	}
	if !p.dev.progress() {
		return 0
	}
	n := p.cq.Poll(wcs)
	if n == 0 {
		// The packets were for other CQs, or called for nothing this
		// caller will answer: hold nothing back.
		p.dev.releaseHold()
	}
	return n
}

// Arm ends the hold, then arms the CQ (cq.CQ.Arm): the caller is about to
// sleep, and must not sleep on ACKs it holds.
func (p *Poller) Arm(solicitedOnly bool) (missed bool) {
	releaseOthers(p.dev)
	p.dev.releaseHold()
	return p.cq.Arm(solicitedOnly)
}

// Release ends the hold without arming: for a caller that stops polling.
func (p *Poller) Release() { p.dev.releaseHold() }
