package cq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// The legacy design, kept on purpose for comparison (Linux SMC-R before its
// move to the CQ pool, protocol-notes §8.9): one send CQ and one receive CQ
// for the whole device, a single tasklet-like poller goroutine, one lock
// around polling and the pending-slot search, batches of LegacyBatch, and
// work requests identified by sequence-number wr_ids that the poller
// resolves by a linear search of the link's pending slots. It is a Pool
// mode (PoolConfig.Legacy), so the same user code runs on both designs.

// LegacyBatch is SMC_WR_MAX_POLL_CQE.
const LegacyBatch = 10

// LegacyDepth is SMC_MAX_CQE, the depth of each of the two device CQs.
const LegacyDepth = 32766

type legacy struct {
	mu     sync.Mutex // the one lock: polling, slot search, tagging, links
	send   *CQ
	recv   *CQ
	links  map[uint32]*legacyLink
	seq    uint64
	used   int
	wcs    []WC    // poller only
	found  []Entry // poller only
	orphan func(*WC)
	// devices bracket every tasklet run (PoolConfig.Devices).
	devices []Device
	// Running the tasklet on a receive goroutine (PoolConfig.Devices):
	// inline (the pool's count) counts receive batches in progress,
	// pending records an event left to them, runMu keeps the tasklet on
	// one goroutine at a time.
	inline  *atomic.Int32
	pending atomic.Bool
	runMu   sync.Mutex

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

// legacyLink is one lease's pending slots.
type legacyLink struct {
	l     *legacy
	n     int
	slots []legacySlot
	qpns  []uint32
}

type legacySlot struct {
	wrid uint64 // 0: free
	e    Entry
}

func newLegacy(orphan func(*WC), onAsync func(error), devices []Device, inline *atomic.Int32) *legacy {
	l := &legacy{
		links: map[uint32]*legacyLink{}, orphan: orphan, devices: devices, inline: inline,
		wcs: make([]WC, LegacyBatch), found: make([]Entry, LegacyBatch),
		wake: make(chan struct{}, 1), done: make(chan struct{}), gen: make(chan struct{}),
	}
	cfg := Config{OnEvent: l.onEvent, OnAsyncError: onAsync}
	l.send, _ = New(LegacyDepth, cfg) // LegacyDepth is in range
	l.recv, _ = New(LegacyDepth, cfg)
	l.send.Arm(false)
	l.recv.Arm(false)
	l.wg.Add(1)
	go l.loop()
	return l
}

func (l *legacy) onEvent() {
	if l.inline.Load() > 0 {
		// A receive batch is in progress: its end runs the tasklet. Should
		// it have ended between the load and the store, wake as usual.
		l.pending.Store(true)
		if l.inline.Load() > 0 || !l.pending.Swap(false) {
			return
		}
	}
	l.wakeLoop()
}

func (l *legacy) wakeLoop() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// get makes a link; the caller holds the pool's mutex.
func (l *legacy) get(p *Pool, n int) (*Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used+n > LegacyDepth {
		return nil, fmt.Errorf("cq: legacy pool: %d entries do not fit the device CQs (%d of %d reserved)", n, l.used, LegacyDepth)
	}
	l.used += n
	return &Lease{pool: p, n: n, leg: &legacyLink{l: l, n: n, slots: make([]legacySlot, n)}}, nil
}

func (l *legacy) put(ls *Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= ls.n
	for _, qpn := range ls.leg.qpns {
		if l.links[qpn] == ls.leg {
			delete(l.links, qpn)
		}
	}
}

func (l *legacy) bind(qpn uint32, k *legacyLink) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.links[qpn] = k
	k.qpns = append(k.qpns, qpn)
}

// tag records e in a free pending slot under a fresh sequence number.
func (k *legacyLink) tag(e Entry) uint64 {
	l := k.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	for i := range k.slots {
		if k.slots[i].wrid == 0 {
			k.slots[i] = legacySlot{wrid: l.seq, e: e}
			return l.seq
		}
	}
	// More outstanding requests than reserved: the caller's bug, but keep
	// the completion reachable rather than lose it.
	k.slots = append(k.slots, legacySlot{wrid: l.seq, e: e})
	return l.seq
}

// resolve finds and frees the pending slot of wc (smc_wr_tx_find_pending_index:
// a linear search). The caller holds l.mu.
func (l *legacy) resolve(wc *WC) Entry {
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

func (l *legacy) loop() {
	defer l.wg.Done()
	for {
		select {
		case <-l.wake:
		case <-l.done:
			return
		}
		l.runMu.Lock()
		l.run()
		l.runMu.Unlock()
	}
}

// run is one scheduled run of the tasklet. The caller holds runMu.
func (l *legacy) run() {
	l.wakeups.Add(1)
	beginBatch(l.devices)
	l.tasklet(l.send, &l.sendDisp)
	l.tasklet(l.recv, &l.recvDisp)
	endBatch(l.devices)
}

// rxEnd runs the tasklet a receive batch fired, on the receive goroutine,
// unless the poller goroutine is running it: then that one runs again. The
// caller has counted the batch's end (inline).
func (l *legacy) rxEnd() {
	if !l.pending.Swap(false) {
		return
	}
	if l.runMu.TryLock() {
		l.inlineRuns.Add(1)
		l.run()
		l.runMu.Unlock()
		return
	}
	l.wakeLoop()
}

// tasklet is smc_wr_tx_tasklet_fn / smc_wr_rx_tasklet_fn: poll in batches
// until empty, re-arming during the first pass, then a second pass to catch
// what slipped in around the arm.
func (l *legacy) tasklet(c *CQ, disp *atomic.Uint64) {
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
				l.wcs[i], l.found[i] = WC{}, nil
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

func (l *legacy) drain(ctx context.Context) error {
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

func (l *legacy) stats() PoolStats {
	l.mu.Lock()
	used := l.used
	l.mu.Unlock()
	return PoolStats{
		CQs: 2, Wakeups: l.wakeups.Load(), InlineRuns: l.inlineRuns.Load(), Completions: l.sendDisp.Load() + l.recvDisp.Load(),
		Orphans: l.orphans.Load(), Reserved: used,
	}
}

func (l *legacy) close() {
	close(l.done)
	l.wg.Wait()
	l.send.Close()
	l.recv.Close()
}
