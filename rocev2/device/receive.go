package device

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// The receive path: one goroutine per device (receiveLoop), run to
// completion. A receive batch is what it handles in one go:
//
//  1. Backend.Receive (or, with a backend.Poller backend, TryReceive from
//     inside its Serve loop) fills rxBatch: recvmmsg, GRO.
//  2. Each datagram is checked (the backend's Drop verdict, the parser, the
//     ICRC verdict, the P_Key) and handed to its QP by number.
//  3. The QP handles it inline; what it answers goes into the outbox,
//     which a run keeps open for the whole batch.
//  4. The end hooks run (OnReceiveBatch: a CQ pool runs the CQs the batch
//     fired, whose handlers post into the same outbox).
//  5. The run ends and the outbox sends everything in one Backend.Send.
//
// rxMu is held for the whole batch, hooks included. Whoever holds it owns
// the receive state below; a Poller takes it only with TryLock, so a
// goroutine that busy-polls never waits for a batch and never receives
// inside one (a completion handler that polls a CQ makes no progress: the
// batch receives again right after).

// maxPollRounds bounds how many full batches one receive batch reads from a
// Poller backend before its end hooks run: completion handlers must not
// starve behind a flood of packets (net_rx_action's budget).
const maxPollRounds = 4

type rxHook struct {
	id         uint64
	begin, end func()
}

type rxHooks struct {
	mu   sync.Mutex // serializes changes
	next uint64
	list atomic.Pointer[[]rxHook] // copy on write
}

// OnReceiveBatch registers begin and end to run on the receive goroutine
// around every batch of packets it handles: begin before the first packet
// is delivered, end after the last, inside the batch's run (what end posts
// leaves with the batch's answers, in one system call). A CQ pool uses them
// to run the CQs the batch fired right there, as a kernel runs softirqs on
// the interrupted CPU at irq exit, instead of waking a poller goroutine
// (cq.PoolConfig.Devices). Every begin is followed by its end, even after
// remove; remove does not wait for a batch in progress.
func (d *Device) OnReceiveBatch(begin, end func()) (remove func()) {
	h := &d.hooks
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	id := h.next
	var list []rxHook
	if p := h.list.Load(); p != nil {
		list = append(list, *p...)
	}
	list = append(list, rxHook{id: id, begin: begin, end: end})
	h.list.Store(&list)
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		var kept []rxHook
		for _, o := range *h.list.Load() {
			if o.id != id {
				kept = append(kept, o)
			}
		}
		h.list.Store(&kept)
	}
}

// BeginRun opens a run on the device's outbox: what is posted until the
// matching EndRun waits and leaves together (a CQ pool brackets each
// completion run with them; cq.Device).
func (d *Device) BeginRun() { d.out.beginRun() }

// EndRun closes a run; the last one to end sends what waits.
func (d *Device) EndRun() { d.out.endRun() }

func (d *Device) receiveLoop() {
	defer close(d.rxDone)
	if d.lend.srv != nil {
		d.serveLent()
		return
	}
	if p, ok := d.backend.(backend.Poller); ok {
		drain := func() bool { return d.drain(p) }
		for {
			err := p.Serve(drain)
			if err == nil || errors.Is(err, backend.ErrBackendClosed) {
				return
			}
			d.Counters.LinkDowned.Add(1)
		}
	}
	for {
		n, err := d.backend.Receive(d.rxBatch)
		if err != nil {
			if errors.Is(err, backend.ErrBackendClosed) {
				return
			}
			d.Counters.LinkDowned.Add(1)
			continue
		}
		d.rxMu.Lock()
		hooks := d.beginBatch()
		d.deliverBatch(n)
		d.endBatch(hooks)
		d.rxMu.Unlock()
	}
}

// drain is the receive goroutine's work with a Poller backend, called by
// its Serve loop: it takes what waits and handles it as one receive batch
// of at most maxPollRounds full reads, and reports whether it may have left
// some (its last read was full), for Serve to call it again at once.
func (d *Device) drain(p backend.Poller) (more bool) {
	d.rxMu.Lock()
	defer d.rxMu.Unlock()
	n, err := p.TryReceive(d.rxBatch)
	if err != nil || n == 0 {
		return false // park: a closed backend ends Serve
	}
	hooks := d.beginBatch()
	d.deliverBatch(n)
	if n == len(d.rxBatch) {
		d.flushMidBatch()
		_, more = d.pollLocked(p, maxPollRounds-1)
	}
	d.endBatch(hooks)
	return more
}

// beginBatch opens a receive batch: its run, then the begin hooks. rxMu is
// held.
func (d *Device) beginBatch() []rxHook {
	var hooks []rxHook
	if h := d.hooks.list.Load(); h != nil {
		hooks = *h
	}
	d.out.beginRun()
	for _, h := range hooks {
		h.begin()
	}
	return hooks
}

// endBatch ends a receive batch: the end hooks, the batch's owed ACKs
// (unless the device defers them), and the run, whose end sends it all.
// rxMu is held.
func (d *Device) endBatch(hooks []rxHook) {
	for _, h := range hooks {
		h.end()
	}
	if !d.deferACKs {
		d.acks.flush() // inside the run: with the batch's other answers
	}
	d.out.endRun()
}

// flushMidBatch sends the answers to what a batch has handled so far when
// more is to come, rather than hold them behind the reading of the rest.
func (d *Device) flushMidBatch() {
	if !d.deferACKs && !d.acks.heldNow.Load() {
		d.acks.flush()
	}
	d.Flush()
}

// pollLocked receives and handles what is waiting, at most rounds full
// batches; it reports whether there was anything, and whether the last
// read was full (more may wait). The caller holds rxMu.
func (d *Device) pollLocked(p backend.Poller, rounds int) (got, full bool) {
	for r := range rounds {
		n, err := p.TryReceive(d.rxBatch)
		if err != nil || n == 0 {
			return got, false
		}
		got = true
		d.deliverBatch(n)
		if n < len(d.rxBatch) {
			return got, false
		}
		if r < rounds-1 {
			d.flushMidBatch()
		}
	}
	return got, true
}

func (d *Device) deliverBatch(n int) {
	for i := range d.rxBatch[:n] {
		d.deliver(&d.rxBatch[i], &d.rxPkt)
	}
}

// progress handles, on the calling goroutine, whatever packets are waiting,
// and reports whether there were any (see Poller). It never blocks: if
// another goroutine is receiving, it returns false at once. On a backend
// that cannot receive without blocking (not a backend.Poller) it does
// nothing.
//
// The ACKs the received packets call for are held (owed) until the
// caller's next call: the caller got its completions first, so its reply
// leaves before the ACK, in the same system call, instead of one system
// call later. What else they call for (NAKs, READ responses) leaves when
// the call returns, in one send batch.
func (d *Device) progress() bool {
	p, ok := d.backend.(backend.Poller)
	if !ok {
		return false
	}
	releaseOthers(d)
	if !d.rxMu.TryLock() {
		return false
	}
	d.releaseHold() // the last hold's ACKs go now
	d.acks.hold()
	d.out.beginRun()
	any, _ := d.pollLocked(p, 1)
	d.out.endRun()
	d.rxMu.Unlock()
	if !any {
		d.releaseHold()
	}
	return any
}

// deliver validates one datagram and hands it to its QP.
func (d *Device) deliver(dg *backend.Incoming, pkt *rocev2.Packet) {
	if dg.Drop != 0 {
		d.countDrop(dg.Drop)
		return
	}
	if err := pkt.Parse(dg.Buf); err != nil {
		if pe, ok := err.(rocev2.ParseError); ok {
			d.countDrop(pe)
		}
		return
	}
	switch dg.ICRC {
	case backend.ICRCVerified: // over the real IPv4 ID: nothing inferred
	case backend.ICRCOK:
		if dg.IPv4ID != 0 {
			d.Counters.RcvdICRCIDInferred.Add(1)
		}
	case backend.ICRCBad:
		d.countDrop(rocev2.ErrICRC)
		return
	default:
		id, ok := d.checkICRC(dg)
		if !ok {
			d.countDrop(rocev2.ErrICRC)
			return
		}
		dg.IPv4ID = id
	}
	bth := pkt.BTH()
	// P_Key: our one table entry is the default full-member key 0xFFFF;
	// a packet matches when the low 15 bits agree (IBTA 10.9.3).
	if bth.PKey()&0x7FFF != 0x7FFF {
		d.Counters.RcvdPKeyErr.Add(1)
		return
	}
	h := d.gsiFor(bth.DestQP())
	if h == nil {
		h = d.qps.lookup(bth.DestQP())
	}
	if h == nil {
		d.Counters.RcvdUnknownQP.Add(1)
		return
	}
	if h.HandlePacket(pkt, dg) {
		d.Counters.RcvdPkts.Add(1)
	}
}

// countDrop counts a datagram rejected for reason e. A reason outside the
// table (a backend's bug) is counted as rcvd_bad_datagram rather than
// indexing out of bounds.
func (d *Device) countDrop(e rocev2.ParseError) {
	if int(e) >= len(d.Counters.Dropped) || e == 0 {
		e = rocev2.ErrDatagram
	}
	d.Counters.Dropped[e].Add(1)
}

// checkICRC verifies a packet whose backend left the ICRC unchecked; for
// IPv4 it returns the ID the packet travelled with.
func (d *Device) checkICRC(dg *backend.Incoming) (id uint16, ok bool) {
	fl := rocev2.NewFlow(dg.Src, d.local)
	if fl.IsIPv6() {
		return 0, fl.VerifyICRC(dg.Buf)
	}
	id, ok = fl.InferIPv4ID(dg.Buf)
	if ok && id != 0 {
		d.Counters.RcvdICRCIDInferred.Add(1)
	}
	return id, ok
}

// BusyPoll polls the device from the calling goroutine, for up to budget,
// until ready reports true, and returns what ready last reported: the
// goroutine that waits for data takes it, and runs the completion
// handlers it fires (a CQ pool's end hooks run here), instead of sleeping
// until the receive goroutine has been woken and has woken it, two
// goroutine hand-offs. It is Linux's busy polling of a socket (busy_read),
// for backends whose TryReceive costs no system call (backend.BusyPoller);
// on the others, with a budget of 0, or while another goroutine busy-polls
// the device (one at a time: a second spinner would only take a processor
// from the first), it returns ready() at once. Between looks it yields
// the processor. ready must not need the receive path's locks.
//
// A look that runs out of budget costs a processor for nothing, and on a
// machine without one to spare it delays the peer the data waits for: so
// after one, the next calls return at once, more of them after each look
// in vain in a row (1, 3, 7, … up to busyMaxSkip), until a look pays again.
func (d *Device) BusyPoll(budget time.Duration, ready func() bool) bool {
	bp := d.busyPoller
	if bp == nil || budget <= 0 || !d.busyPolling.CompareAndSwap(false, true) {
		return ready()
	}
	defer d.busyPolling.Store(false)
	b := &d.busy // ours while busyPolling is
	if b.skip > 0 {
		b.skip--
		return ready()
	}
	deadline := time.Now().Add(budget)
	begun, got := false, false
	for !got && time.Now().Before(deadline) {
		if d.rxMu.TryLock() {
			if !begun {
				bp.BeginBusyPoll() // the peers ring no doorbell while we look
				begun = true
			}
			d.busyBatchLocked(bp)
			d.rxMu.Unlock()
		}
		if got = ready(); !got {
			runtime.Gosched()
		}
	}
	if got {
		b.misses = 0
	} else {
		b.misses = min(b.misses+1, busyMaxMisses)
		b.skip = 1<<b.misses - 1
		d.Counters.BusyPollMisses.Add(1)
	}
	if begun {
		d.rxMu.Lock()
		for bp.EndBusyPoll() && d.busyBatchLocked(bp) {
		}
		d.rxMu.Unlock()
	}
	return got || ready()
}

// busyMaxMisses bounds BusyPoll's back-off: after that many looks in vain
// in a row, 63 calls in 64 sleep at once.
const busyMaxMisses = 6

// busyState is BusyPoll's back-off, owned by the goroutine in BusyPoll.
type busyState struct {
	misses int // looks in vain in a row
	skip   int // calls still to return at once
}

// busyBatchLocked handles one receive batch of what waits, end hooks
// included, and reports whether there was anything. rxMu is held.
func (d *Device) busyBatchLocked(p backend.Poller) bool {
	n, err := p.TryReceive(d.rxBatch)
	if err != nil || n == 0 {
		return false
	}
	d.Counters.BusyPolledPkts.Add(uint64(n))
	hooks := d.beginBatch()
	d.deliverBatch(n)
	d.endBatch(hooks)
	return true
}
