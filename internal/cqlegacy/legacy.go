// Package cqlegacy is Linux SMC-R's completion design before it moved to
// the RDMA core's CQ pool, kept for the comparison the pool exists for
// (cmd/smc-bench's smc-original mode, cmd/cq-bench): a cq.Allocator that
// the benchmarks bring to smcr and to their own queue pairs. It is not part
// of goroce's API.
package cqlegacy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/cq"
)

// Legacy is Linux SMC-R's completion design before it moved to the CQ pool,
// kept on purpose for the comparison the pool exists for: one send CQ and
// one receive CQ for the whole device, a single tasklet-like poller
// goroutine that polls under one lock in batches of Batch, and work
// requests identified by sequence-number wr_ids that the poller resolves by
// a linear search of the link's pending slots. It implements cq.Allocator, so
// the same upper-layer code runs on it and on Pool.
type Legacy struct {
	mu     sync.Mutex // the one lock: polling, slot search, tagging, links
	send   *cq.CQ
	recv   *cq.CQ
	links  map[uint32]*Link
	seq    uint64
	used   int
	closed bool
	wcs    []cq.WC    // poller only
	found  []cq.Entry // poller only
	orphan func(*cq.WC)
	// devices bracket every tasklet run (Config.Devices).
	devices []cq.Device
	// Running the tasklet on a receive goroutine (Config.Devices):
	// rxBatches counts receive batches in progress, pending records an
	// event left to them, runMu keeps the tasklet on one goroutine at a
	// time, removes unregister the hooks.
	rxBatches atomic.Int32
	pending   atomic.Bool
	runMu     sync.Mutex
	removes   []func()

	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup

	wakeups    atomic.Uint64
	inlineRuns atomic.Uint64
	sendDisp   atomic.Uint64
	recvDisp   atomic.Uint64
	orphans    atomic.Uint64

	genMu  sync.Mutex // drain waiters wait on gen, closed after each batch
	gen    chan struct{}
	nDrain atomic.Int32
}

// Batch is SMC_WR_MAX_POLL_CQE.
const Batch = 10

// Depth is SMC_MAX_CQE, the depth of each of the two device CQs.
const Depth = 32766

// Config configures a Legacy design.
type Config struct {
	// OnOrphan, if set, receives completions whose wr_id matches no
	// pending slot.
	OnOrphan func(*cq.WC)
	// OnAsyncError, if set, receives CQ overflows.
	OnAsyncError func(error)
	// Devices, as in PoolConfig: given them, the tasklet runs on the
	// receive goroutine after a batch that fired it (what Linux never did;
	// the benchmark's legacy-rtc mode, to show how much running to
	// completion alone is worth).
	Devices []cq.Device
}

var _ cq.Allocator = (*Legacy)(nil)

// New starts the legacy design's tasklet goroutine.
func New(cfg Config) *Legacy {
	l := &Legacy{
		links: map[uint32]*Link{}, orphan: cfg.OnOrphan, devices: cfg.Devices,
		wcs: make([]cq.WC, Batch), found: make([]cq.Entry, Batch),
		wake: make(chan struct{}, 1), done: make(chan struct{}), gen: make(chan struct{}),
	}
	ccfg := cq.Config{OnEvent: l.onEvent, OnAsyncError: cfg.OnAsyncError}
	l.send, _ = cq.New(Depth, ccfg) // Depth is in range
	l.recv, _ = cq.New(Depth, ccfg)
	l.send.Arm(false)
	l.recv.Arm(false)
	for _, d := range cfg.Devices {
		l.removes = append(l.removes, d.OnReceiveBatch(l.rxBegin, l.rxEnd))
	}
	l.wg.Add(1)
	go l.loop()
	return l
}

// Link is one QP's pending slots: a cq.Reservation of the legacy design.
type Link struct {
	l     *Legacy
	n     int
	slots []legacySlot
	qpns  []uint32
	put   atomic.Bool
}

var _ cq.Reservation = (*Link)(nil)

type legacySlot struct {
	wrid uint64 // 0: free
	e    cq.Entry
}

func (l *Legacy) onEvent() {
	if l.rxBatches.Load() > 0 {
		// A receive batch is in progress: its end runs the tasklet. Should
		// it have ended between the load and the store, wake as usual.
		l.pending.Store(true)
		if l.rxBatches.Load() > 0 || !l.pending.Swap(false) {
			return
		}
	}
	l.wakeLoop()
}

func (l *Legacy) wakeLoop() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Reserve makes a link with n pending slots on the device CQs.
func (l *Legacy) Reserve(n int) (cq.Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, cq.ErrPoolClosed
	}
	if n < 1 || l.used+n > Depth {
		return nil, fmt.Errorf("cq: legacy: %d entries do not fit the device CQs (%d of %d reserved)", n, l.used, Depth)
	}
	l.used += n
	return &Link{l: l, n: n, slots: make([]legacySlot, n)}, nil
}

// SendCQ returns the device-wide send CQ.
func (k *Link) SendCQ() *cq.CQ { return k.l.send }

// RecvCQ returns the device-wide receive CQ.
func (k *Link) RecvCQ() *cq.CQ { return k.l.recv }

// Bind records that the link's work requests come from QP qpn.
func (k *Link) Bind(qpn uint32) {
	l := k.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.links[qpn] = k
	k.qpns = append(k.qpns, qpn)
}

// Tag records e in a free pending slot under a fresh sequence number and
// returns it as the wr_id, with no cq.Entry.
func (k *Link) Tag(e cq.Entry) (uint64, cq.Entry) {
	l := k.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	for i := range k.slots {
		if k.slots[i].wrid == 0 {
			k.slots[i] = legacySlot{wrid: l.seq, e: e}
			return l.seq, nil
		}
	}
	// More outstanding requests than reserved: the caller's bug, but keep
	// the completion reachable rather than lose it.
	k.slots = append(k.slots, legacySlot{wrid: l.seq, e: e})
	return l.seq, nil
}

// TagUnsignaled returns no wr_id and no Entry: an unsignaled request
// completes only in error, and then as an orphan (Config.OnOrphan).
func (k *Link) TagUnsignaled(cq.Entry) (uint64, cq.Entry) { return 0, nil }

// Drain waits until every completion pushed to the device CQs before the
// call has been handled.
func (k *Link) Drain(ctx context.Context) error { return k.l.drain(ctx) }

// Release returns the link's slots and entries.
func (k *Link) Release() {
	if !k.put.CompareAndSwap(false, true) {
		return
	}
	l := k.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= k.n
	for _, qpn := range k.qpns {
		if l.links[qpn] == k {
			delete(l.links, qpn)
		}
	}
}

// resolve finds and frees the pending slot of wc (smc_wr_tx_find_pending_index:
// a linear search). The caller holds l.mu.
func (l *Legacy) resolve(wc *cq.WC) cq.Entry {
	k := l.links[wc.QPNum]
	if k == nil {
		return nil
	}
	for i := range k.slots {
		if k.slots[i].wrid == wc.WRID {
			e := k.slots[i].e
			k.slots[i] = legacySlot{}
			return e
		}
	}
	return nil
}

func (l *Legacy) loop() {
	defer l.wg.Done()
	for {
		select {
		case <-l.wake:
		case <-l.done:
			return
		}
		l.runMu.Lock()
		l.run(false)
		l.runMu.Unlock()
	}
}

// run is one scheduled run of the tasklet. The caller holds runMu. inBatch
// says a receive batch's end runs it, inside the device's run.
func (l *Legacy) run(inBatch bool) {
	l.wakeups.Add(1)
	if !inBatch {
		for _, d := range l.devices {
			d.BeginRun()
		}
	}
	l.tasklet(l.send, &l.sendDisp)
	l.tasklet(l.recv, &l.recvDisp)
	if !inBatch {
		for _, d := range l.devices {
			d.EndRun()
		}
	}
}

func (l *Legacy) rxBegin() { l.rxBatches.Add(1) }

// rxEnd runs the tasklet a receive batch fired, on the receive goroutine,
// unless the tasklet goroutine is running it: then that one runs again.
func (l *Legacy) rxEnd() {
	l.rxBatches.Add(-1)
	if !l.pending.Swap(false) {
		return
	}
	if l.runMu.TryLock() {
		defer l.runMu.Unlock()
		select {
		case <-l.done:
			return // closed (Close waits for runMu after closing done)
		default:
		}
		l.inlineRuns.Add(1)
		l.run(true)
		return
	}
	l.wakeLoop()
}

// tasklet is smc_wr_tx_tasklet_fn / smc_wr_rx_tasklet_fn: poll in batches
// until empty, re-arming during the first pass, then a second pass to catch
// what slipped in around the arm.
func (l *Legacy) tasklet(c *cq.CQ, disp *atomic.Uint64) {
	for pass := 1; pass <= 2; pass++ {
		for {
			l.mu.Lock()
			n := c.Poll(l.wcs)
			if pass == 1 {
				c.Arm(false)
			}
			for i := 0; i < n; i++ {
				l.found[i] = l.resolve(&l.wcs[i])
			}
			l.mu.Unlock()
			if n == 0 {
				break
			}
			for i := 0; i < n; i++ {
				wc := &l.wcs[i]
				wc.Entry = l.found[i]
				if wc.Entry != nil {
					wc.Entry.Done(wc)
				} else {
					l.orphans.Add(1)
					if l.orphan != nil {
						l.orphan(wc)
					}
				}
				l.wcs[i], l.found[i] = cq.WC{}, nil
			}
			disp.Add(uint64(n))
			if l.nDrain.Load() > 0 {
				l.genMu.Lock()
				close(l.gen)
				l.gen = make(chan struct{})
				l.genMu.Unlock()
			}
		}
	}
}

func (l *Legacy) drain(ctx context.Context) error {
	ts, tr := l.send.Pushed(), l.recv.Pushed()
	l.nDrain.Add(1)
	defer l.nDrain.Add(-1)
	for {
		l.genMu.Lock()
		ch := l.gen
		l.genMu.Unlock()
		if l.sendDisp.Load() >= ts && l.recvDisp.Load() >= tr {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stats returns the design's counters (its two CQs as one pool).
func (l *Legacy) Stats() cq.PoolStats {
	l.mu.Lock()
	used := l.used
	l.mu.Unlock()
	return cq.PoolStats{
		CQs: 2, Wakeups: l.wakeups.Load(), InlineRuns: l.inlineRuns.Load(), Completions: l.sendDisp.Load() + l.recvDisp.Load(),
		Orphans: l.orphans.Load(), Reserved: used,
	}
}

// Close stops the tasklet goroutine after its current run and closes the
// CQs; a receive batch that ends later runs nothing.
func (l *Legacy) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	for _, remove := range l.removes {
		remove()
	}
	close(l.done)
	l.runMu.Lock() // wait for a tasklet run on a receive goroutine
	l.runMu.Unlock()
	l.wg.Wait()
	l.send.Close()
	l.recv.Close()
	return nil
}
