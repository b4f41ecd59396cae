package qp

// Ghost responses. A response names a PSN, and what the completer does
// with it (complete WQEs, place READ data, rewind, fail the QP) is only
// right for a PSN this requester sent and has not seen answered. The
// source-address check lets through anyone on the peer's IP address (the
// UDP source port is not checked), so a response with any other PSN is
// dropped before it touches the QP and counted as rcvd_ghost_resp: a
// forgery, or a late duplicate of an answer already acted on (the two
// look alike, and a duplicate has nothing left to do). Without this, one
// NAK with a PSN far ahead of anything sent failed the QP, and one ACK so
// far ahead completed every WQE in flight, whether the peer had them or
// not.
//
// The valid relation of each kind, with S the oldest unacknowledged PSN
// (comp.psn) and E one past the highest PSN sent (req.maxSent; after a
// go-back-N rewind the PSNs up to E are still on the wire):
//
//	ACK            S-1 ≤ p < E   covers p and below; S-1 repeats the
//	                             last ACK, as a responder answers a
//	                             duplicate request (rxe's prev_psn)
//	NAK, RNR NAK   S ≤ p < E     names a request that is still unanswered
//	READ response  S ≤ p < E     inside a started READ's PSN span
//	atomic ACK     S ≤ p < E     the first (only) PSN of a started atomic
//
// A kernel rxe responder sends nothing outside these (its ACKs name its
// last PSN received, its NAKs the PSN it expects or the request that
// failed, its READ responses the PSNs of the READ asked for), so nothing
// an rxe or IBTA peer sends while the connection lives is dropped but late
// duplicates; rxe's own completer ignores responses before S the same way
// (check_psn).

import "github.com/goroce/goroce/rocev2"

// unanswered reports whether psn was sent and is not yet acknowledged:
// S ≤ psn < E.
func (q *QP) unanswered(psn rocev2.PSN) bool {
	return !psn.Before(q.comp.psn) && psn.Before(q.req.maxSent)
}

// isGhost reports whether a response of opcode op (syndrome kind, for
// those with an AETH) names a PSN its kind may not.
func (q *QP) isGhost(op rocev2.Opcode, kind rocev2.SyndromeKind, psn rocev2.PSN) bool {
	switch {
	case op == rocev2.RCAcknowledge && kind == rocev2.KindACK:
		return !q.unanswered(psn) && psn != q.comp.psn.Add(^uint32(0))
	case !q.unanswered(psn):
		return true
	case op == rocev2.RCAtomicAcknowledge:
		w := q.sentWQEAt(psn)
		return w == nil || !w.op.isAtomic()
	case op.Is(rocev2.OpPayload): // READ responses
		w := q.sentWQEAt(psn)
		return w == nil || w.op != WRRDMARead
	}
	return false // a NAK or RNR NAK
}

// sentWQEAt returns the started, unfinished WQE whose PSN span holds psn,
// or nil. WQEs get their spans in order and keep them across a rewind, so
// the search ends at the first WQE not started or starting after psn; it
// is the head WQE for every response of a READ or atomic at the head.
func (q *QP) sentWQEAt(psn rocev2.PSN) *sendWQE {
	for i := q.sq.head; i != q.sq.tail; i++ {
		w := q.sq.at(i)
		switch {
		case !w.started:
			return nil
		case w.state == wqeDone:
			continue // a local operation: no PSNs
		case w.firstPSN.After(psn):
			return nil
		case !w.lastPSN.Before(psn):
			return w
		}
	}
	return nil
}
