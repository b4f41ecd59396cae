package cq

import "context"

// Allocator is where an upper layer (SMC-R, a benchmark) gets the CQs of
// its queue pairs and through which their completions reach their
// handlers. Pool, the kernel's CQ pool (ib_cq_pool_get: shared CQs per
// completion vector whose completions carry their handler, the ib_cqe way)
// implements it; so does the design Linux SMC-R had before it moved to the
// pool, which the benchmarks bring (internal/cqlegacy: one send and one
// receive CQ for the whole device, a single tasklet-like poller, wr_id
// sequence numbers looked up in each link's pending slots). Code written
// against Allocator and Reservation runs on either, which is what the
// CQ-pooling experiment compares; cqtest holds the checks every design
// runs.
type Allocator interface {
	// Reserve sets aside nCQE entries for one queue pair's send and
	// receive completions.
	Reserve(nCQE int) (Reservation, error)
	// Stats returns the design's counters.
	Stats() PoolStats
	// Close stops the design's goroutines after their current run.
	Close() error
}

// Reservation is one queue pair's share of an Allocator's CQs.
type Reservation interface {
	// SendCQ and RecvCQ are the CQs to create the QP with (the pool's are
	// the same CQ).
	SendCQ() *CQ
	RecvCQ() *CQ
	// Bind tells the reservation the number of the QP created on it. The
	// legacy design finds a completion's pending slots by QP number; the
	// pool needs nothing.
	Bind(qpn uint32)
	// Tag returns the wr_id and Entry to put in a work request whose
	// completion must call e.Done. The pool: (0, e). The legacy design: a
	// fresh sequence number recorded in a pending slot, and no Entry.
	Tag(e Entry) (wrid uint64, entry Entry)
	// TagUnsignaled is Tag for an unsignaled work request, which completes
	// only in error: the pool names e; the legacy design, whose pending
	// slots a request that never completes would never free, names
	// nothing, and its error completion reaches the design's orphan
	// handler instead.
	TagUnsignaled(e Entry) (wrid uint64, entry Entry)
	// Drain waits until every completion pushed before the call has been
	// handled: after the QP is destroyed, no Done of its work requests
	// runs once Drain returns. Not from a handler of the same CQ.
	Drain(ctx context.Context) error
	// Release returns the entries. Destroy the QP and Drain first.
	Release()
}

// Device is what a Pool (or another design) needs of a device whose QPs use its CQs
// to run to completion on it (PoolConfig.Devices); rocev2/device.Device
// implements it.
type Device interface {
	// BeginRun and EndRun bracket a run of completion handlers: what the
	// handlers post leaves together when the last open run ends (one
	// system call per run, like xmit_more in a NAPI run).
	BeginRun()
	EndRun()
	// OnReceiveBatch registers functions that the device's receive
	// goroutine calls before and after each batch of packets it handles,
	// inside a run of its own.
	OnReceiveBatch(begin, end func()) (remove func())
}

func beginRun(ds []Device) {
	for _, d := range ds {
		d.BeginRun()
	}
}

func endRun(ds []Device) {
	for _, d := range ds {
		d.EndRun()
	}
}
