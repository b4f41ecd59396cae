package qp

import (
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/device"
)

// Every locked section of a QP ends in unlock, which does, in order:
//
//  1. gives back the device's outbox if the section built packets (q.tx);
//  2. releases the QP's lock;
//  3. has the device send what is due (Device.Push), or for a post end a
//     poller's hold too (Device.Posted): no system call is made under the
//     QP's lock;
//  4. delivers what the section raised: CQ events (cq.CQ.Notify, which
//     calls the CQ's OnEvent), asynchronous events (InitAttr.OnAsyncEvent)
//     and the SRQ's limit event (SRQInitAttr.OnEvent).
//
// So no callback ever runs under the QP's lock: an OnEvent or an
// OnAsyncEvent may post to this QP, poll, modify or destroy it.

// notices are what a locked section raised for callbacks.
type notices struct {
	any                bool
	sendFired          bool
	recvFired          bool
	sendErr, recvErr   error
	srqLimit           bool // taking a WQE crossed the SRQ's limit
	events             [maxSectionEvents]Event
	nEvents, lostCount int
}

// maxSectionEvents bounds the async events one locked section raises: a
// CQ error, the move to ERR, SQ drained.
const maxSectionEvents = 4

// tx returns the device's outbox for building packets, taking it on first
// use in this locked section; unlock gives it back.
func (q *QP) tx() *device.Outbox {
	if q.out == nil {
		ah := &q.attr.AH
		q.out = q.dev.OutboxFor(backend.Sender{QPN: q.qpn, FlowLabel: ah.FlowLabel, HopLimit: ah.HopLimit, TrafficClass: ah.TClass})
	}
	return q.out
}

// event records an async event for delivery after the lock is released.
func (q *QP) event(e Event) {
	if q.onEvt == nil {
		return
	}
	n := &q.nt
	n.any = true
	if n.nEvents < len(n.events) {
		n.events[n.nEvents] = e
		n.nEvents++
	} else {
		n.lostCount++ // cannot happen with the events one section raises
	}
}

// unlock ends a locked section (see the top of this file).
func (q *QP) unlock() {
	due := false
	if q.out != nil {
		due = q.out.Release()
		q.out = nil
	}
	posted := q.posted
	q.posted = false
	fired := q.nt.sendFired || q.nt.recvFired || q.nt.sendErr != nil || q.nt.recvErr != nil
	if !fired && !q.nt.any {
		q.mu.Unlock()
		q.push(due, posted)
		return
	}
	nt := q.nt
	q.nt = notices{}
	q.mu.Unlock()
	q.push(due, posted)
	if q.sendCQ == q.recvCQ {
		err := nt.sendErr
		if err == nil {
			err = nt.recvErr
		}
		q.sendCQ.Notify(nt.sendFired || nt.recvFired, err)
	} else {
		if nt.sendFired || nt.sendErr != nil {
			q.sendCQ.Notify(nt.sendFired, nt.sendErr)
		}
		if nt.recvFired || nt.recvErr != nil {
			q.recvCQ.Notify(nt.recvFired, nt.recvErr)
		}
	}
	for _, e := range nt.events[:nt.nEvents] {
		q.onEvt(e)
	}
	if nt.srqLimit && q.srq.onEvt != nil {
		q.srq.onEvt(SRQEvent{Type: EventSRQLimitReached, SRQ: q.srq})
	}
}

// push sends what the section left in the outbox, now that the QP's lock
// is released: a post ends a poller's hold (its ACKs leave after the
// post's packets, in the same send), anything else goes if it is due.
func (q *QP) push(due, posted bool) {
	switch {
	case posted:
		q.dev.Posted()
	case due:
		q.dev.Push()
	}
}
