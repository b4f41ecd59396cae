package device

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// The receive path: one goroutine per device (receiveLoop), run to
// completion. A receive batch is what it handles in one go:
//
//  1. Backend.Receive (or, with a backend.Poller backend, TryReceive after
//     WaitReadable) fills rxBatch: recvmmsg, GRO.
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
	if p, ok := d.backend.(backend.Poller); ok {
		for {
			if err := p.WaitReadable(); err != nil {
				if errors.Is(err, backend.ErrBackendClosed) {
					return
				}
				d.Counters.LinkDowned.Add(1)
				continue
			}
			d.receiveBatch(p, 0)
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
		d.receiveBatch(nil, n)
	}
}

// receiveBatch handles one batch inside a run, between the hooks: with a
// Poller, what it has waiting; else the n datagrams in rxBatch.
func (d *Device) receiveBatch(p backend.Poller, n int) {
	var hooks []rxHook
	if h := d.hooks.list.Load(); h != nil {
		hooks = *h
	}
	d.rxMu.Lock()
	defer d.rxMu.Unlock()
	d.out.beginRun()
	defer d.out.endRun()
	for _, h := range hooks {
		h.begin()
	}
	if p != nil {
		d.pollLocked(p, maxPollRounds)
	} else {
		d.deliverBatch(n)
	}
	for _, h := range hooks {
		h.end()
	}
	if !d.deferACKs {
		d.acks.flush() // inside the run: with the batch's other answers
	}
}

// pollLocked receives and handles what is waiting, at most rounds full
// batches; it reports whether there was anything. The caller holds rxMu.
func (d *Device) pollLocked(p backend.Poller, rounds int) bool {
	any := false
	for range rounds {
		n, err := p.TryReceive(d.rxBatch)
		if err != nil || n == 0 {
			return any
		}
		any = true
		d.deliverBatch(n)
		if n < len(d.rxBatch) {
			return any
		}
		// More to come: send the answers to these now rather than hold
		// them behind the reading of the rest.
		if !d.deferACKs && !d.acks.heldNow.Load() {
			d.acks.flush()
		}
		d.Flush()
	}
	return any
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
	any := d.pollLocked(p, 1)
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
	d.Counters.RcvdPkts.Add(1)
	h.HandlePacket(pkt, dg)
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
