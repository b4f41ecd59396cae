package qp

// The completer handles what comes back for the send queue:
//
//  0. A response whose PSN its kind may not name (nothing sent there, or
//     answered already) is a ghost: dropped and counted (ghost.go).
//  1. Every response acknowledges earlier PSNs: an ACK with PSN p covers
//     p and below, a NAK, RNR NAK, READ response or atomic ACK with PSN p
//     covers everything below p. SEND/WRITE WQEs so covered complete, in
//     order (ACKs are coalesced: one ACK completes many WQEs).
//  2. Then by kind: READ responses are placed into the WQE's SGL at their
//     PSN's offset; an atomic ACK returns the original value; a PSN-sequence
//     NAK, a response past the expected PSN, or an ACK past an unanswered
//     READ/atomic start a go-back-N retry (consuming retry_cnt); an RNR NAK
//     waits its timer and retries (consuming rnr_retry); other NAKs fail the
//     WQE and the QP.
//  3. Progress restores the retry counters and re-arms the retransmit
//     timer; the timer's expiry is a retry too.

import (
	"encoding/binary"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
)

// completer is the send side's acknowledgement state.
type completer struct {
	psn       rocev2.PSN // oldest PSN not yet acknowledged
	retryLeft uint8
	rnrLeft   uint8
	// A retry is active from the rewind until everything sent before it
	// (up to retryEnd) is acknowledged. Meanwhile responses to the packets
	// sent before the rewind are still arriving: an ACK past an unanswered
	// READ, or another NAK for retryPSN, says nothing new and must not
	// start another retry (only the timer may).
	retryActive bool
	retryPSN    rocev2.PSN
	retryEnd    rocev2.PSN
}

func (c *completer) start(q *QP) {
	c.psn = q.attr.SQPSN
	c.retryLeft, c.rnrLeft = q.attr.RetryCnt, q.attr.RNRRetry
}

// complete handles one response packet. It reports whether the send side
// made progress (so the requester may send more).
func (q *QP) complete(pkt *rocev2.Packet) bool {
	op := pkt.Opcode()
	psn := pkt.BTH().PSN()
	aeth := pkt.AETH()
	if q.trace != nil {
		var syn rocev2.Syndrome
		if aeth != nil {
			syn = aeth.Syndrome()
		}
		q.trace("rx %v psn %#x syn %v (comp %#x req %#x)", op, psn, syn, q.comp.psn, q.req.psn)
	}
	kind := rocev2.KindACK
	if aeth != nil {
		kind = aeth.Syndrome().Kind()
	}
	if q.isGhost(op, kind, psn) {
		q.dev.Counters.RcvdGhostResp.Add(1)
		return false // ghost.go: not for anything this QP has outstanding
	}
	if q.sq.head == q.sq.req && (q.sq.head == q.sq.tail || q.sq.at(q.sq.head).nextPkt == 0) {
		return false // nothing in flight: the repeated last ACK, or an answer to what a rewind is about to resend
	}

	through := psn.Add(^uint32(0)) // psn - 1
	if op == rocev2.RCAcknowledge && kind == rocev2.KindACK {
		through = psn
	}
	progress := q.ackThrough(through)
	if progress {
		// Something was acknowledged: the peer is alive and answering, so
		// the retry budget starts over (before a NAK in this same packet
		// takes from it).
		q.comp.retryLeft, q.comp.rnrLeft = q.attr.RetryCnt, q.attr.RNRRetry
	}

	switch {
	case op == rocev2.RCAcknowledge:
		switch kind {
		case rocev2.KindACK:
			if w := q.headReadLike(); w != nil && !psn.Before(w.firstPSN) {
				// The responder went past a READ/atomic whose response
				// never arrived: an implied NAK.
				q.retryFrom(q.comp.psn, retryImplied)
			}
		case rocev2.KindRNR:
			q.dev.Counters.RcvdRNRErr.Add(1)
			q.onRNR(psn, aeth.Syndrome().Code())
			return progress
		case rocev2.KindNAK:
			q.dev.Counters.RcvdNAKs.Add(1)
			q.onNAK(psn, aeth.Syndrome().Code())
			return progress
		default:
			return progress // reserved syndrome: ignore
		}
	case op == rocev2.RCAtomicAcknowledge:
		progress = q.onAtomicAck(pkt, psn) || progress
	case op.Is(rocev2.OpPayload): // READ responses
		if aeth != nil && kind != rocev2.KindACK {
			if kind == rocev2.KindNAK {
				q.onNAK(psn, aeth.Syndrome().Code())
			}
			return progress
		}
		progress = q.onReadResponse(pkt, psn) || progress
	}
	if q.state == Err {
		return false
	}
	if progress {
		q.comp.retryLeft, q.comp.rnrLeft = q.attr.RetryCnt, q.attr.RNRRetry
	}
	if q.comp.retryActive && !q.comp.psn.Before(q.comp.retryEnd) {
		q.comp.retryActive = false // everything sent before the rewind is acknowledged
	}
	q.rearmRetryTimer()
	return progress
}

// ackThrough completes the SEND/WRITE WQEs whose last PSN is at or before
// through and advances comp.psn past what is acknowledged.
func (q *QP) ackThrough(through rocev2.PSN) bool {
	progress := false
	if !through.Before(q.comp.psn) && !q.comp.psn.After(q.req.psn) {
		// isGhost keeps through below req.maxSent. After a rewind the
		// peer may acknowledge PSNs from req.psn up to there, sent before
		// the rewind: comp.psn must not pass req.psn, and the WQEs there
		// are to be sent again anyway (wqePosted stops the loop below).
		if !through.Before(q.req.psn) {
			through = q.req.psn.Add(^uint32(0))
		}
		for q.sq.head != q.sq.req || (q.sq.head != q.sq.tail && q.sq.at(q.sq.head).nextPkt > 0) {
			w := q.sq.at(q.sq.head)
			if w.state == wqeDone {
				q.retireHead()
				continue
			}
			if !w.started || w.op.isReadLike() {
				break // a READ/atomic completes only with its response
			}
			if w.lastPSN.After(through) {
				// Partly acknowledged multi-packet message.
				if next := through.Add(1); next.After(q.comp.psn) && !w.firstPSN.After(through) {
					q.comp.psn = next
					progress = true
				}
				break
			}
			if w.state != wqePending {
				break // not fully sent (a retry rewound it)
			}
			q.comp.psn = w.lastPSN.Add(1)
			w.state, w.status = wqeDone, cq.Success
			q.retireHead()
			progress = true
		}
	}
	return progress
}

// headReadLike returns the head WQE if it is a started READ or atomic.
func (q *QP) headReadLike() *sendWQE {
	if q.sq.head == q.sq.tail {
		return nil
	}
	w := q.sq.at(q.sq.head)
	if w.started && w.state != wqeDone && w.op.isReadLike() {
		return w
	}
	return nil
}

func (q *QP) onReadResponse(pkt *rocev2.Packet, psn rocev2.PSN) bool {
	w := q.headReadLike()
	if w == nil || w.op != WRRDMARead || !psn.InRange(w.firstPSN, w.lastPSN) {
		return false // not for the READ we wait for: stale
	}
	if psn.After(q.comp.psn) { // (one before comp.psn is a ghost: a duplicate)
		q.dev.Counters.RcvdSeqErr.Add(1)
		q.retryFrom(q.comp.psn, retryImplied) // a response went missing
		return false
	}
	k := uint32(psn.Sub(w.firstPSN))
	mtu := uint32(q.mtu)
	want := min(mtu, w.length-k*mtu)
	if w.length == 0 {
		want = 0
	}
	op := pkt.Opcode()
	last := psn == w.lastPSN
	chunkEnd := k+1 == readChunk(k, w.npkts)
	data := pkt.Payload()
	if uint32(len(data)) != want || chunkEnd != op.Is(rocev2.OpLast) {
		q.fatal(w, cq.BadRespErr)
		return false
	}
	if len(data) > 0 {
		c := sglCursor{sgl: w.sgl, mrs: w.mrs}
		c.seek(uint64(k) * uint64(mtu))
		if c.scatter(q.pd, data) != nil {
			q.fatal(w, cq.LocProtErr)
			return false
		}
	}
	q.comp.psn = psn.Add(1)
	if chunkEnd && k/readChunkPkts == w.chunksDone {
		q.req.ordInUse-- // the chunk's request is answered in full
		w.chunksDone++
	}
	if last {
		w.state, w.status = wqeDone, cq.Success
		q.retireHead()
	}
	return true
}

func (q *QP) onAtomicAck(pkt *rocev2.Packet, psn rocev2.PSN) bool {
	w := q.headReadLike()
	if w == nil || !w.op.isAtomic() || psn != w.firstPSN {
		if w != nil && psn.After(q.comp.psn) {
			q.retryFrom(q.comp.psn, retryImplied)
		}
		return false
	}
	var orig [8]byte
	binary.NativeEndian.PutUint64(orig[:], pkt.AtomicAckETH().Orig())
	c := sglCursor{sgl: w.sgl, mrs: w.mrs}
	if c.scatter(q.pd, orig[:]) != nil {
		q.fatal(w, cq.LocProtErr)
		return false
	}
	q.comp.psn = psn.Add(1)
	w.state, w.status = wqeDone, cq.Success
	q.req.ordInUse--
	q.retireHead()
	return true
}

func (q *QP) onNAK(psn rocev2.PSN, code uint8) {
	switch code {
	case rocev2.NAKPSNSequence:
		q.dev.Counters.RcvdSeqErr.Add(1)
		q.retryFrom(psn, retryNAK)
	case rocev2.NAKInvalidRequest:
		q.fatal(q.headWQE(), cq.RemInvReqErr)
	case rocev2.NAKRemoteAccess:
		q.fatal(q.headWQE(), cq.RemAccessErr)
	default: // remote operational error, invalid RD, reserved codes
		q.fatal(q.headWQE(), cq.RemOpErr)
	}
}

func (q *QP) headWQE() *sendWQE {
	if q.sq.head == q.sq.tail {
		return nil
	}
	return q.sq.at(q.sq.head)
}

// onRNR handles an RNR NAK for psn: wait the timer, then resend from psn.
func (q *QP) onRNR(psn rocev2.PSN, timer uint8) {
	if q.attr.RNRRetry != 7 {
		if q.comp.rnrLeft == 0 {
			q.dev.Counters.RetryRNRExceededErr.Add(1)
			q.fatal(q.headWQE(), cq.RNRRetryExcErr)
			return
		}
		q.comp.rnrLeft--
	}
	q.rewind()
	q.req.rnrWait = true
	q.dev.Timers().Stop(&q.retryTm)
	d := time.Duration(rocev2.RNRTimerMicros(timer)) * time.Microsecond
	q.dev.Timers().Reset(&q.rnrTm, d)
}

func (q *QP) onRNRTimer() {
	q.mu.Lock()
	defer q.unlock()
	if !q.req.rnrWait || (q.state != RTS && q.state != SQD) {
		return
	}
	q.req.rnrWait = false
	q.runRequester()
}

// retryCause says what asks for a retry.
type retryCause uint8

const (
	retryNAK     retryCause = iota // a PSN-sequence NAK
	retryImplied                   // a response past an unanswered READ/atomic
	retryTimeout                   // the local ACK timeout
)

// retryFrom starts a go-back-N retry at psn, consuming retry_cnt, unless the
// cause is an echo of the retry already active.
func (q *QP) retryFrom(psn rocev2.PSN, cause retryCause) {
	c := &q.comp
	if psn.Before(c.psn) {
		return // stale: already acknowledged past it
	}
	if c.retryActive {
		switch cause {
		case retryImplied:
			return
		case retryNAK:
			if psn == c.retryPSN {
				return
			}
		}
	}
	if q.trace != nil {
		q.trace("retry cause %d psn %#x comp %#x left %d active %v", cause, psn, c.psn, c.retryLeft, c.retryActive)
	}
	if !q.consumeRetry() {
		return
	}
	c.retryActive, c.retryPSN, c.retryEnd = true, psn, q.req.maxSent
	q.rewind()
}

// consumeRetry takes one retry; when none are left the head WQE fails with
// RETRY_EXC_ERR and the QP goes to ERR.
func (q *QP) consumeRetry() bool {
	if !(q.retry7 && q.attr.RetryCnt == 7) {
		if q.comp.retryLeft == 0 {
			q.dev.Counters.RetryExceededErr.Add(1)
			q.fatal(q.headWQE(), cq.RetryExcErr)
			return false
		}
		q.comp.retryLeft--
	}
	q.dev.Counters.CompleterRetryErr.Add(1)
	return true
}

// rewind makes the requester resend everything from comp.psn, the oldest
// unacknowledged PSN (go-back-N): the head WQE resumes at the packet with
// that PSN (a READ re-requests only the rest), every later started WQE
// starts over with the same PSNs. A NAK's PSN is not used directly: it
// acknowledges SEND/WRITE packets before it (ackThrough did that) but never
// an unanswered READ or atomic, whose responses are still owed.
func (q *QP) rewind() {
	end := q.sq.req
	if end != q.sq.tail && q.sq.at(end).nextPkt > 0 {
		end++ // the partly sent WQE
	}
	for i := q.sq.head; i != end; i++ {
		w := q.sq.at(i)
		if w.state == wqeDone {
			continue
		}
		w.state, w.nextPkt = wqePosted, 0
		if i == q.sq.head && w.started && q.comp.psn.InRange(w.firstPSN, w.lastPSN) {
			w.nextPkt = uint32(q.comp.psn.Sub(w.firstPSN))
		}
	}
	q.sq.req = q.sq.head
	q.req.psn = q.comp.psn
	q.req.sinceAck = 0
}

// onRetryTimer fires when nothing was acknowledged for the local ACK timeout.
func (q *QP) onRetryTimer() {
	q.mu.Lock()
	defer q.unlock()
	if q.state != RTS && q.state != SQD {
		return
	}
	if q.req.psn == q.comp.psn && q.headReadLike() == nil {
		return // everything was acknowledged meanwhile
	}
	q.retryFrom(q.comp.psn, retryTimeout)
	if q.state == Err {
		return
	}
	q.runRequester()
}

// rearmRetryTimer keeps the retransmit timer running while PSNs are out.
func (q *QP) rearmRetryTimer() {
	d := q.ackTimeout()
	if d == 0 || q.req.rnrWait {
		return
	}
	if q.req.psn != q.comp.psn || q.headReadLike() != nil {
		q.dev.Timers().Reset(&q.retryTm, d)
	} else {
		q.dev.Timers().Stop(&q.retryTm)
	}
}

// retireHead emits the head WQE's completion if it is done, then retires
// every following done WQE (local ops, which complete in order too).
func (q *QP) retireHead() {
	for q.sq.head != q.sq.tail {
		w := q.sq.at(q.sq.head)
		if w.state != wqeDone {
			break
		}
		q.retire(w, w.status)
		q.sq.head++
		if q.sq.req < q.sq.head {
			q.sq.req = q.sq.head
		}
	}
	if q.state == SQD {
		q.checkDrained()
	}
}

// retire pushes w's completion: always for errors, for success only when
// the WR was signaled.
func (q *QP) retire(w *sendWQE, st cq.Status) {
	if st == cq.Success && !w.signaled {
		w.entry = nil
		return
	}
	wc := cq.WC{
		WRID: w.wrid, Entry: w.entry, Status: st, Opcode: w.op.wcOpcode(),
		QPNum: q.qpn, SrcQP: q.attr.DestQPN,
	}
	if st == cq.Success {
		wc.ByteLen = w.length
	}
	w.entry = nil
	q.pushSend(&wc)
}
