package qp

import "fmt"

// String describes the QP's transport state for diagnostics.
func (q *QP) String() string {
	q.mu.Lock()
	defer q.unlock()
	s := fmt.Sprintf("qp %#x %v: sq head %d req %d tail %d; psn %#x maxSent %#x comp %#x ord %d rnrWait %v retry(active %v psn %#x end %#x left %d); resp epsn %#x msn %d nak %v",
		q.qpn, q.state, q.sq.head, q.sq.req, q.sq.tail, q.req.psn, q.req.maxSent, q.comp.psn, q.req.ordInUse,
		q.req.rnrWait, q.comp.retryActive, q.comp.retryPSN, q.comp.retryEnd, q.comp.retryLeft, q.resp.epsn, q.resp.msn, q.resp.nakSent)
	if q.sq.head != q.sq.tail {
		w := q.sq.at(q.sq.head)
		s += fmt.Sprintf("; head wqe %v state %d started %v psn %#x-%#x next %d/%d; timer armed %v",
			w.op, w.state, w.started, w.firstPSN, w.lastPSN, w.nextPkt, w.npkts, q.dev.Timers().Armed(&q.retryTm))
	}
	return s
}
