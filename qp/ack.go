package qp

import (
	"github.com/goroce/goroce/rocev2"
)

// A packet that asks for an ACK (AckReq) does not get one at once: its QP
// owes one (resp.ackOwed, ackPSN) and tells the device (Device.OweACK),
// which has it built later (SendOwedACK) as its table of when says: at the
// end of the receive batch, at a poller's next call, or with DeferACKs
// across batches. An ACK covers every PSN before it, so one ACK answers
// every request that asked since the last; a NAK or a READ or atomic
// response built meanwhile acknowledges as much (responded), and the owed
// ACK is dropped. So the decision is made on the QP's typed state, never
// on packet bytes in the outbox.

// maxOwedSpan is how many PSNs an owed ACK may cover, with DeferACKs,
// before the QP sends it without waiting (without, the receive batch's end
// sends it within microseconds): a peer that keeps sending small
// messages gets an ACK at least every maxOwedSpan packets, well inside an
// RC send window (rxe: 128 PSNs; goroce: qp.SendWindow) and within half of
// an SMC-R link's 16 send slots when each message is a WRITE and a CDC.
const maxOwedSpan = 16

// oweACK records that the peer asked for an ACK of psn.
func (q *QP) oweACK(psn rocev2.PSN) {
	r := &q.resp
	r.ackOwed, r.ackPSN, r.ackMSN = true, psn, r.msn
	if psn.Sub(r.acked) >= maxOwedSpan && q.dev.DefersACKs() {
		q.buildOwedACK()
		return
	}
	if !r.ackQueued {
		r.ackQueued = true
		q.dev.OweACK((*acker)(q))
	}
}

// responded records a response built that acknowledges every request up
// to psn (an ACK of psn, a NAK of psn+1, a READ response or atomic ACK of
// psn): an owed ACK for no more is dropped.
func (q *QP) responded(psn rocev2.PSN) {
	r := &q.resp
	if r.ackOwed && !r.ackPSN.After(psn) {
		r.ackOwed = false
	}
	if psn.After(r.acked) {
		r.acked = psn
	}
}

// buildOwedACK builds the owed ACK into the outbox.
func (q *QP) buildOwedACK() {
	r := &q.resp
	r.ackOwed = false
	if r.ackPSN.After(r.acked) {
		r.acked = r.ackPSN
	}
	f := &r.fields
	*f = rocev2.Fields{
		Opcode: rocev2.RCAcknowledge, PKey: 0xffff, DestQP: q.attr.DestQPN, PSN: r.ackPSN,
		Syndrome: rocev2.SyndromeACKUnlimited, MSN: r.ackMSN,
	}
	buf, _ := f.Append(q.tx().Buffer(), nil)
	q.out.Commit(buf, q.raddr)
}

// settleACK builds the owed ACK now, before the QP stops answering (it is
// destroyed, reset or in error): what it acknowledges was received and
// placed, and the peer would otherwise retransmit it until it gives up (as
// an application that exits right after its last completion makes it).
func (q *QP) settleACK() {
	switch q.state {
	case RTR, RTS, SQD, SQE:
		if q.resp.ackOwed {
			q.buildOwedACK()
		}
	}
}

// acker is a QP as the device's device.ACKer: the method stays off the
// QP's exported API.
type acker QP

// SendOwedACK builds the ACK the QP owes, if it still owes one and may
// still send.
func (a *acker) SendOwedACK() {
	q := (*QP)(a)
	q.mu.Lock()
	defer q.unlock()
	r := &q.resp
	r.ackQueued = false
	switch q.state {
	case RTR, RTS, SQD, SQE:
		if r.ackOwed {
			q.buildOwedACK()
		}
	default:
		r.ackOwed = false
	}
}
