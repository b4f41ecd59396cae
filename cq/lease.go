package cq

import (
	"context"
	"sync/atomic"
)

// Lease is one reservation of CQ entries from a Pool, normally for one QP
// (one link). It gives the QP its CQs and, so that the same code runs on
// the pooled and the legacy design, turns a handler into the wr_id and
// Entry to put in each work request (Tag).
type Lease struct {
	pool *Pool
	n    int
	m    *Managed    // pooled mode
	leg  *legacyLink // legacy mode
	put  atomic.Bool
}

// SendCQ returns the CQ to give the QP as its send CQ.
func (l *Lease) SendCQ() *CQ {
	if l.leg != nil {
		return l.leg.l.send
	}
	return l.m.cq
}

// RecvCQ returns the CQ to give the QP as its receive CQ. In pooled mode it
// is the same CQ as SendCQ.
func (l *Lease) RecvCQ() *CQ {
	if l.leg != nil {
		return l.leg.l.recv
	}
	return l.m.cq
}

// Managed returns the pooled CQ (nil in legacy mode).
func (l *Lease) Managed() *Managed { return l.m }

// Entries returns the number of entries reserved.
func (l *Lease) Entries() int { return l.n }

// Vector returns the completion vector of the lease's CQ.
func (l *Lease) Vector() int {
	if l.leg != nil {
		return 0
	}
	return l.m.vector
}

// Bind tells the lease which QP number its work requests come from. The
// legacy design finds a completion's link by QP number; pooled CQs need
// nothing (the Entry is in the completion).
func (l *Lease) Bind(qpn uint32) {
	if l.leg != nil {
		l.leg.l.bind(qpn, l.leg)
	}
}

// Tag returns the wr_id and Entry to set in a work request whose completion
// must run e.Done. Pooled: (0, e), the ib_cqe way. Legacy: a fresh sequence
// number recorded in a pending slot, and no Entry; the legacy poller finds
// the slot again by linear search.
func (l *Lease) Tag(e Entry) (wrid uint64, entry Entry) {
	if l.leg != nil {
		return l.leg.tag(e), nil
	}
	return 0, e
}

// Drain waits until every completion pushed to the lease's CQs before the
// call has been handled: after the QP is destroyed, no Done of its work
// requests runs once Drain returns. Not from a handler of the same CQ.
func (l *Lease) Drain(ctx context.Context) error {
	if l.leg != nil {
		return l.leg.l.drain(ctx)
	}
	return l.m.Drain(ctx)
}
