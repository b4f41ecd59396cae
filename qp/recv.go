package qp

import "github.com/goroce/goroce/cq"

// Where the responder's receive WQEs come from: the QP's own receive queue,
// or the SRQ it was created on. A message takes its WQE at its first packet
// (takeRecv) and gives it up once completed (consumeRecv).

// takeRecv returns the receive WQE the next inbound message fills, or nil
// when none is posted. From the receive queue it is the head, which stays
// there until consumeRecv (a dropped UC/UD message leaves it for the next
// one). From an SRQ it is taken off the SRQ at once and copied into
// resp.srqWQE, as rxe copies it, since other QPs take the next ones and the
// slot is posted again.
func (q *QP) takeRecv() *recvWQE {
	if q.srq == nil {
		if q.rq.empty() {
			return nil
		}
		return q.rq.at(q.rq.head)
	}
	w := &q.resp.srqWQE
	ok, limit := q.srq.take(w)
	if limit {
		q.nt.any, q.nt.srqLimit = true, true
	}
	if !ok {
		return nil
	}
	return w
}

// consumeRecv retires the WQE of the message just completed (or failed).
func (q *QP) consumeRecv() {
	if q.srq == nil {
		q.rq.head++
	}
}

// completeRecv completes the receive in progress (resp.rwqe) with wc, which
// has the status, opcode, length and flags filled in, and retires it.
func (q *QP) completeRecv(wc *cq.WC, solicited bool) {
	w := q.resp.rwqe
	wc.WRID, wc.Entry, wc.QPNum = w.wrid, w.entry, q.qpn
	w.entry = nil
	q.consumeRecv()
	q.resp.rwqe = nil
	q.pushRecv(wc, solicited)
}

// failRecv completes the receive in progress, if any, with status st.
func (q *QP) failRecv(st cq.Status) {
	if q.resp.rwqe == nil {
		return
	}
	wc := cq.WC{Status: st, Opcode: cq.OpRecv}
	q.completeRecv(&wc, false)
}
