package qp

// The requester turns send WQEs into packets:
//
//  1. Take the WQE at sq.req. Local operations (LOCAL_INV) run at once.
//  2. Gate it: a FENCE waits for every earlier WQE to complete, READ and
//     atomics need an ORD credit (max_rd_atomic), and no more than
//     maxUnackedPSNs PSNs may be in flight.
//  3. On its first packet the WQE gets its PSN span: one PSN per packet for
//     SEND/WRITE (payload cut at the path MTU), one per expected response
//     packet for READ, one for an atomic.
//  4. Build each packet straight into the device's outbox; AckReq goes on the last
//     packet of a message and at least every maxPktsPerAck packets.
//  5. Arm the retransmit timer. The completer rewinds nextPkt and sq.req for
//     go-back-N; packets are then rebuilt from the WQE, not kept.

import (
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// requester is the send side's PSN state.
type requester struct {
	psn      rocev2.PSN // PSN of the next packet
	maxSent  rocev2.PSN // highest PSN sent + 1: below it a send is a retransmission
	sinceAck int        // packets sent since the last AckReq
	ordInUse int        // READ/atomic requests on the wire, not yet answered in full
	rnrWait  bool       // an RNR NAK's timer is running: send nothing
	sent     uint64     // packets built: did the requester send anything?
	fields   rocev2.Fields
}

func (r *requester) start(psn rocev2.PSN) { r.psn, r.maxSent = psn, psn }

// runRequester sends what the send queue, the window and the gates allow,
// and (re)arms the retransmit timer once for whatever it sent.
func (q *QP) runRequester() {
	sent := q.req.sent
	q.sendWhatCan()
	if q.req.sent != sent {
		if d := q.ackTimeout(); d > 0 {
			q.dev.Timers().Reset(&q.retryTm, d)
		}
	}
}

func (q *QP) sendWhatCan() {
	for q.sq.req != q.sq.tail {
		if q.state != RTS && q.state != SQD {
			return
		}
		if q.req.rnrWait {
			return
		}
		w := q.sq.at(q.sq.req)
		if w.state == wqeDone { // a local op, already executed
			q.sq.req++
			continue
		}
		if q.state == SQD && w.nextPkt == 0 {
			return // draining: stop at a message boundary
		}
		if !w.started {
			if !q.startWQE(w) {
				return
			}
			if w.state == wqeDone {
				q.sq.req++
				q.retireHead()
				continue
			}
		}
		if q.typ == RC && q.req.psn.Sub(q.comp.psn) >= maxUnackedPSNs {
			return // window full: the next ACK calls us again
		}
		if !q.sendPacket(w) {
			return
		}
		if w.nextPkt == w.npkts {
			q.sq.req++
			if q.typ != RC {
				// Nothing acknowledges UC and UD: the WR is done
				// once its last packet is built (rxe completes it
				// once sent).
				w.state, w.status = wqeDone, cq.Success
				q.comp.psn = q.req.psn
				q.retireHead()
				continue
			}
			w.state = wqePending
		}
	}
	if q.state == SQD {
		q.checkDrained()
	}
}

// startWQE applies the gates and assigns the WQE its PSN span. It returns
// false when the WQE must wait.
func (q *QP) startWQE(w *sendWQE) bool {
	if w.localErr != cq.Success {
		q.fatal(w, w.localErr)
		return false
	}
	if w.flags&SendFence != 0 && q.sq.req != q.sq.head {
		return false
	}
	if w.op == WRLocalInv {
		w.state, w.status, w.started = wqeDone, q.localInvalidate(w.imm), true
		return true
	}
	if w.op.isReadLike() {
		if q.attr.MaxRdAtomic == 0 {
			q.fatal(w, cq.LocQPOpErr) // max_rd_atomic 0: this QP may not issue READ/atomics
			return false
		}
		if !q.ordCredit() {
			return false
		}
	}
	w.npkts = 1 // atomics, and zero-length messages
	if !w.op.isAtomic() {
		if n := (w.length + uint32(q.mtu) - 1) / uint32(q.mtu); n > 1 {
			w.npkts = n
		}
	}
	if q.typ == RC && q.req.psn.Sub(q.comp.psn) >= maxUnackedPSNs {
		return false
	}
	w.started = true
	w.firstPSN = q.req.psn
	w.lastPSN = q.req.psn.Add(w.npkts - 1)
	return true
}

// ordCredit reports whether one more READ/atomic request may go on the wire
// (max_rd_atomic, the initiator depth).
func (q *QP) ordCredit() bool { return q.req.ordInUse < int(q.attr.MaxRdAtomic) }

// readChunkPkts is the most response packets one READ request asks for.
// A larger READ goes out as several requests, each for a chunk of it, sent
// as the window allows: the responder answers each with one burst, and
// bounded bursts are what keep a multi-megabyte READ from overrunning the
// receiver (nothing else paces READ responses). Each chunk is an IBTA READ
// request of its own and takes an ORD credit.
const readChunkPkts = 64

// readChunk returns the packet index range [k, end) of the chunk holding
// packet k of a READ of n packets. Chunk bounds are fixed, so a retry that
// resumes inside a chunk asks for the rest of that same chunk, which the
// responder recognises as a subrange of a request it already served.
func readChunk(k, n uint32) (end uint32) {
	return min((k/readChunkPkts+1)*readChunkPkts, n)
}

// localInvalidate runs LOCAL_INV on rkey.
func (q *QP) localInvalidate(key uint32) cq.Status {
	mr, _ := q.dev.LookupKey(key)
	if mr == nil || mr.PD() != q.pd {
		return cq.LocProtErr
	}
	mr.Invalidate()
	return cq.Success
}

// sendPacket builds and queues the WQE's next packet. It returns false when
// it cannot: a local error (the QP is then in ERR) or no ORD credit.
func (q *QP) sendPacket(w *sendWQE) bool {
	k := w.nextPkt
	psn := w.firstPSN.Add(k)
	f := &q.req.fields
	*f = rocev2.Fields{PKey: 0xffff, DestQP: q.attr.DestQPN, PSN: psn}
	dst := q.raddr
	if q.typ == UD {
		f.DestQP, f.QKey, f.SrcQP, dst = w.udQPN, w.udQKey, q.qpn, w.udAddr
		// The packet's IP header follows the WR's address handle, not
		// the QP's (a UD QP has none).
		q.tx().SetSender(backend.Sender{QPN: q.qpn, HopLimit: w.udHop, TrafficClass: w.udTClass})
	}
	mtu := uint32(q.mtu)
	var payload uint32
	first, last := k == 0, k == w.npkts-1

	switch {
	case w.op == WRRDMARead:
		end := readChunk(k, w.npkts)
		if k >= w.chunksSent*readChunkPkts { // a new chunk, not a retry of one
			if !q.ordCredit() {
				return false
			}
			q.req.ordInUse++
			w.chunksSent++
		}
		f.Opcode = rocev2.RCReadRequest
		f.VA = w.raddr + uint64(k)*uint64(mtu)
		f.RKey = w.rkey
		f.Len = min(w.length, end*mtu) - k*mtu
		f.AckReq = true
		w.nextPkt = end
	case w.op.isAtomic():
		if w.chunksSent == 0 {
			if !q.ordCredit() {
				return false
			}
			q.req.ordInUse++
			w.chunksSent = 1
		}
		f.Opcode = rocev2.RCFetchAdd
		f.SwapAdd = w.compareAdd
		if w.op == WRAtomicCmpAndSwp {
			f.Opcode = rocev2.RCCompareSwap
			f.SwapAdd, f.Compare = w.swap, w.compareAdd
		}
		f.VA, f.RKey = w.raddr, w.rkey
		f.AckReq = true
		w.nextPkt = 1
	default:
		payload = min(mtu, w.length-k*mtu)
		f.Opcode = dataOpcode(w.op, first, last) | q.tr
		if f.Opcode.Has(rocev2.HdrRETH) {
			f.VA, f.RKey, f.Len = w.raddr, w.rkey, w.length
		}
		if f.Opcode.Has(rocev2.HdrImmDt) {
			f.Imm = w.imm
		}
		if f.Opcode.Has(rocev2.HdrIETH) {
			f.InvRKey = w.imm
		}
		f.SE = last && w.flags&SendSolicited != 0 && (w.op.isSend() || w.op == WRRDMAWriteWithImm)
		f.AckReq = q.typ == RC && (last || q.req.sinceAck+1 >= maxPktsPerAck)
		w.nextPkt++
	}

	buf, err := f.AppendHeaders(q.tx().Buffer(), int(payload))
	if err != nil {
		q.fatal(w, cq.LocQPOpErr)
		return false
	}
	if payload > 0 {
		start := len(buf)
		buf = buf[:start+int(payload)]
		if w.isInline {
			copy(buf[start:], w.inline[k*mtu:])
		} else {
			c := sglCursor{sgl: w.sgl, mrs: w.mrs}
			c.seek(uint64(k) * uint64(mtu))
			if c.gather(q.pd, buf[start:]) != nil {
				q.fatal(w, cq.LocProtErr) // the region went away under us
				return false
			}
		}
	}
	buf = rocev2.AppendTrailer(buf, int(payload))
	q.out.Commit(buf, dst)
	q.req.sent++
	if q.trace != nil {
		q.trace("tx %v psn %#x", f.Opcode, psn)
	}

	if f.AckReq {
		q.req.sinceAck = 0
	} else {
		q.req.sinceAck++
	}
	if first && (w.op.isWrite() || w.op.isReadLike()) {
		q.dev.Counters.RDMASends.Add(1)
	}
	next := psn.Add(1)
	if w.op == WRRDMARead {
		next = w.firstPSN.Add(w.nextPkt)
	}
	if psn.Before(q.req.maxSent) {
		q.dev.Counters.RetransmittedPkts.Add(1)
	}
	if next.After(q.req.maxSent) {
		q.req.maxSent = next
	}
	q.req.psn = next
	return true
}

// dataOpcode picks the RC opcode of a SEND/WRITE packet by its place; ORed
// with a QP's transport bits, it is the UC or UD one (the opcode tables of
// the three transports share their low five bits).
func dataOpcode(op WROpcode, first, last bool) rocev2.Opcode {
	type pos struct{ first, middle, last, only rocev2.Opcode }
	var p pos
	switch op {
	case WRSend:
		p = pos{rocev2.RCSendFirst, rocev2.RCSendMiddle, rocev2.RCSendLast, rocev2.RCSendOnly}
	case WRSendWithImm:
		p = pos{rocev2.RCSendFirst, rocev2.RCSendMiddle, rocev2.RCSendLastImm, rocev2.RCSendOnlyImm}
	case WRSendWithInv:
		p = pos{rocev2.RCSendFirst, rocev2.RCSendMiddle, rocev2.RCSendLastInv, rocev2.RCSendOnlyInv}
	case WRRDMAWrite:
		p = pos{rocev2.RCWriteFirst, rocev2.RCWriteMiddle, rocev2.RCWriteLast, rocev2.RCWriteOnly}
	case WRRDMAWriteWithImm:
		p = pos{rocev2.RCWriteFirst, rocev2.RCWriteMiddle, rocev2.RCWriteLastImm, rocev2.RCWriteOnlyImm}
	}
	switch {
	case first && last:
		return p.only
	case first:
		return p.first
	case last:
		return p.last
	}
	return p.middle
}

// checkDrained raises SQ_DRAINED once an SQD QP has nothing in flight.
func (q *QP) checkDrained() {
	if q.sqdSent || q.req.psn != q.comp.psn {
		return
	}
	if q.sq.req != q.sq.tail && q.sq.at(q.sq.req).nextPkt != 0 {
		return
	}
	q.sqdSent = true
	q.event(Event{Type: EventSQDrained, QPN: q.qpn})
}
