package cq

import (
	"context"
	"sync/atomic"
)

// Lease is one reservation of entries on a pooled CQ, normally for one QP
// (one link): the QP uses the lease's CQ as both its send and receive CQ.
type Lease struct {
	pool *Pool
	n    int
	m    *Managed
	put  atomic.Bool
}

var _ Reservation = (*Lease)(nil)

// SendCQ returns the pooled CQ.
func (l *Lease) SendCQ() *CQ { return l.m.cq }

// RecvCQ returns the pooled CQ (the same as SendCQ).
func (l *Lease) RecvCQ() *CQ { return l.m.cq }

// Managed returns the pooled CQ's driver.
func (l *Lease) Managed() *Managed { return l.m }

// Entries returns the number of entries reserved.
func (l *Lease) Entries() int { return l.n }

// Vector returns the completion vector of the lease's CQ.
func (l *Lease) Vector() int { return l.m.vector }

// Bind does nothing: a pooled completion names its handler.
func (l *Lease) Bind(uint32) {}

// Tag returns (0, e): the completion carries e.
func (l *Lease) Tag(e Entry) (uint64, Entry) { return 0, e }

// TagUnsignaled returns 0 and e, as Tag does.
func (l *Lease) TagUnsignaled(e Entry) (uint64, Entry) { return 0, e }

// Drain waits until every completion pushed to the lease's CQ before the
// call has been handled.
func (l *Lease) Drain(ctx context.Context) error { return l.m.Drain(ctx) }

// Release returns the entries to the pool (Pool.Put).
func (l *Lease) Release() { l.pool.Put(l) }
