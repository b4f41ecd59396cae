package qp

// The responder executes inbound requests, in rxe's order of checks:
//
//	PSN → op sequence → op valid → resources → length → rkey → execute → acknowledge
//
//   - PSN: ahead of the expected PSN → one PSN-sequence NAK, then silence
//     until the expected PSN arrives; behind it → a duplicate: SEND/WRITE
//     are acknowledged again, READs replayed from the response resources,
//     atomics answered from the saved result (an atomic never runs twice).
//   - A SEND (or WRITE with immediate) without a receive WQE → RNR NAK.
//   - Invalid requests, length errors and bad rkeys → NAK, error
//     completion of the receive WQE in progress, and the QP goes to ERR.
//   - ACKs are coalesced: only packets with AckReq are acknowledged, and
//     the ACK is owed, not built (ack.go): one ACK covers what a receive
//     batch (with DeferACKs, several) asked to be acknowledged.

import (
	"errors"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// responder is the receive side's state.
type responder struct {
	epsn    rocev2.PSN // expected PSN
	msn     uint32     // completed inbound messages (24 bits)
	nakSent bool       // a PSN-sequence NAK went out for epsn
	inSend  bool       // inside a multi-packet SEND
	inWrite bool       // inside a multi-packet WRITE
	rwqe    *recvWQE   // receive WQE of the SEND / WRITE_IMM in progress
	recvOff uint64     // bytes placed into rwqe
	recvCur sglCursor
	wmr     *device.MR // WRITE in progress: region, next address, bytes left
	wva     uint64
	wresid  uint32
	wlen    uint32
	res     []resource // READ/atomic response resources (IRD ring)
	resNext int
	fields  rocev2.Fields

	// The ACK owed (ack.go): for ackPSN, with ackMSN, since the last
	// response, which acknowledged up to acked.
	ackOwed   bool
	ackQueued bool // on the device's list (Device.OweACK) until SendOwedACK
	ackPSN    rocev2.PSN
	ackMSN    uint32
	acked     rocev2.PSN

	// UC: the message in progress is being dropped (rxe's drop_msg): a
	// packet was lost or refused, so the rest of it is dropped until the
	// next message starts.
	dropMsg bool
	// srqWQE holds the receive WQE taken from the SRQ (recv.go).
	srqWQE recvWQE
	// grh is where a UD receive's GRH area is built before it is
	// scattered.
	grh [rocev2.GRHLen]byte
}

// resource remembers a READ or atomic so that a duplicate can be answered
// without executing it again.
type resource struct {
	used     bool
	atomic   bool
	firstPSN rocev2.PSN
	lastPSN  rocev2.PSN
	va       uint64
	rkey     uint32
	length   uint32
	mr       *device.MR
	orig     uint64 // atomic: the value before
	msn      uint32 // MSN reported with the response
}

func (r *responder) initResources(n int) {
	size := 1
	for size < n {
		size <<= 1 // rxe rounds to a power of two
	}
	if n == 0 {
		size = 0
	}
	r.res = make([]resource, size)
	r.resNext = 0
}

// reset forgets all protocol state; the SRQ WQE's preallocated SGL stays.
func (r *responder) reset() {
	sgl, mrs := r.srqWQE.sgl[:0], r.srqWQE.mrs[:0]
	*r = responder{}
	r.srqWQE.sgl, r.srqWQE.mrs = sgl, mrs
}

func (q *QP) respond(pkt *rocev2.Packet) {
	r := &q.resp
	psn := pkt.BTH().PSN()
	op := pkt.Opcode()
	if q.trace != nil {
		q.trace("req %v psn %#x epsn %#x ackreq %v", op, psn, r.epsn, pkt.BTH().AckReq())
	}

	// CHK_PSN
	if d := psn.Sub(r.epsn); d != 0 {
		if d > 0 {
			q.dev.Counters.OutOfSeqRequest.Add(1)
			if !r.nakSent {
				r.nakSent = true
				q.sendAck(rocev2.SyndromeNAKPSNSeq, r.epsn)
			}
			return
		}
		q.dev.Counters.DuplicateRequest.Add(1)
		q.duplicate(pkt, psn)
		return
	}
	r.nakSent = false

	// CHK_OP_SEQ
	switch {
	case r.inSend:
		if !op.Is(rocev2.OpSend) || op.Is(rocev2.OpFirst) {
			q.respError(rocev2.SyndromeNAKInvalid, cq.RemInvReqErr)
			return
		}
	case r.inWrite:
		if !op.Is(rocev2.OpWrite) || op.Is(rocev2.OpFirst) {
			q.respError(rocev2.SyndromeNAKInvalid, cq.RemInvReqErr)
			return
		}
	default:
		if !op.Is(rocev2.OpFirst) {
			q.respError(rocev2.SyndromeNAKInvalid, cq.RemInvReqErr)
			return
		}
	}

	// CHK_OP_VALID
	acc := q.attr.AccessFlags
	switch {
	case op.Is(rocev2.OpRead) && acc&device.AccessRemoteRead == 0,
		op.Is(rocev2.OpWrite) && acc&device.AccessRemoteWrite == 0,
		op.Is(rocev2.OpAtomic) && acc&device.AccessRemoteAtomic == 0,
		op.Is(rocev2.OpFlush), op.Is(rocev2.OpAtomicWrite): // not implemented: invalid
		q.respError(rocev2.SyndromeNAKInvalid, cq.RemInvReqErr)
		return
	}

	// CHK_RESOURCE
	if (op.Is(rocev2.OpRead) || op.Is(rocev2.OpAtomic)) && len(r.res) == 0 {
		q.respError(rocev2.SyndromeNAKInvalid, cq.RemInvReqErr)
		return
	}
	if op.ConsumesRecvWQE() {
		if r.rwqe = q.takeRecv(); r.rwqe == nil {
			q.dev.Counters.SendRNRErr.Add(1)
			q.sendAck(rocev2.RNRSyndrome(q.attr.MinRNRTimer), psn)
			// The rest of this message is out of sequence until the
			// requester resends from psn: drop it silently.
			r.nakSent = true
			return
		}
		r.recvOff = 0
		r.recvCur = sglCursor{sgl: r.rwqe.sgl, mrs: r.rwqe.mrs}
		if r.rwqe.localErr != cq.Success {
			q.respError(rocev2.SyndromeNAKOperation, r.rwqe.localErr)
			return
		}
	}

	// CHK_LENGTH
	n := len(pkt.Payload())
	switch {
	case op.Is(rocev2.OpFirst) && !op.Is(rocev2.OpLast) && n != q.mtu,
		!op.Is(rocev2.OpFirst) && !op.Is(rocev2.OpLast) && n != q.mtu,
		op.Is(rocev2.OpLast) && n > q.mtu:
		q.respError(rocev2.SyndromeNAKInvalid, cq.RemInvReqErr)
		return
	}

	switch {
	case op.Is(rocev2.OpSend):
		q.execSend(pkt)
	case op.Is(rocev2.OpWrite):
		q.execWrite(pkt)
	case op.Is(rocev2.OpRead):
		q.execRead(pkt)
	case op.Is(rocev2.OpAtomic):
		q.execAtomic(pkt)
	}
}

// respError NAKs the current packet with syn, fails the receive WQE in
// progress with st and moves the QP to ERR.
func (q *QP) respError(syn rocev2.Syndrome, st cq.Status) {
	q.sendAck(syn, q.resp.epsn)
	q.failRecv(st)
	q.enterError()
}

func (q *QP) execSend(pkt *rocev2.Packet) {
	r := &q.resp
	op := pkt.Opcode()
	data := pkt.Payload()
	if r.recvOff+uint64(len(data)) > r.rwqe.capacity {
		q.respError(rocev2.SyndromeNAKInvalid, cq.LocLenErr)
		return
	}
	if err := r.recvCur.scatter(q.pd, data); err != nil {
		q.respError(rocev2.SyndromeNAKOperation, cq.LocProtErr)
		return
	}
	r.recvOff += uint64(len(data))
	r.inSend = !op.Is(rocev2.OpLast)
	if op.Is(rocev2.OpLast) {
		wc := cq.WC{Opcode: cq.OpRecv, ByteLen: uint32(r.recvOff)}
		if imm := pkt.ImmDt(); imm != nil {
			wc.Imm, wc.Flags = imm.Imm(), cq.WithImm
		}
		if ieth := pkt.IETH(); ieth != nil {
			if st := q.remoteInvalidate(ieth.RKey()); st != cq.Success {
				q.respError(rocev2.SyndromeNAKOperation, st)
				return
			}
			wc.Imm, wc.Flags = ieth.RKey(), cq.WithInv
		}
		q.finishRecv(&wc, pkt.BTH().SE())
		r.msn = (r.msn + 1) & 0xFFFFFF
	}
	q.advance(pkt)
}

// remoteInvalidate runs the invalidation of SEND_WITH_INV.
func (q *QP) remoteInvalidate(rkey uint32) cq.Status {
	mr, isRKey := q.dev.LookupKey(rkey)
	if mr == nil || !isRKey || mr.PD() != q.pd {
		return cq.RemOpErr
	}
	mr.Invalidate()
	return cq.Success
}

// finishRecv completes the receive WQE in progress successfully.
func (q *QP) finishRecv(wc *cq.WC, solicited bool) {
	wc.SrcQP = q.attr.DestQPN
	q.completeRecv(wc, solicited)
}

func (q *QP) execWrite(pkt *rocev2.Packet) {
	r := &q.resp
	op := pkt.Opcode()
	data := pkt.Payload()
	if reth := pkt.RETH(); reth != nil {
		q.dev.Counters.RDMARecvs.Add(1)
		r.wva, r.wlen, r.wresid, r.wmr = reth.VA(), reth.Len(), reth.Len(), nil
		if reth.Len() > 0 {
			mr, st := q.checkRKey(reth.RKey(), reth.VA(), reth.Len(), device.AccessRemoteWrite)
			if st != 0 {
				q.respError(st, cq.RemAccessErr)
				return
			}
			r.wmr = mr
		}
	}
	if uint32(len(data)) > r.wresid || (op.Is(rocev2.OpLast) && uint32(len(data)) != r.wresid) {
		q.respError(rocev2.SyndromeNAKInvalid, cq.RemInvReqErr) // payload does not add up to the RETH length
		return
	}
	if len(data) > 0 {
		if err := r.wmr.CopyTo(q.pd, r.wva, data, device.AccessRemoteWrite); err != nil {
			q.respError(rocev2.SyndromeNAKAccess, cq.RemAccessErr)
			return
		}
	}
	r.wva += uint64(len(data))
	r.wresid -= uint32(len(data))
	r.inWrite = !op.Is(rocev2.OpLast)
	if op.Is(rocev2.OpLast) {
		if imm := pkt.ImmDt(); imm != nil {
			wc := cq.WC{Opcode: cq.OpRecvRDMAWithImm, ByteLen: r.wlen, Imm: imm.Imm(), Flags: cq.WithImm}
			q.finishRecv(&wc, pkt.BTH().SE())
		}
		r.msn = (r.msn + 1) & 0xFFFFFF
	}
	q.advance(pkt)
}

// advance moves past an executed SEND/WRITE packet and, if asked, owes
// its ACK.
func (q *QP) advance(pkt *rocev2.Packet) {
	psn := pkt.BTH().PSN()
	q.resp.epsn = psn.Add(1)
	if pkt.BTH().AckReq() {
		q.oweACK(psn)
	} else {
		q.dev.Counters.AckDeferred.Add(1)
	}
}

// checkRKey validates an inbound access of n bytes at va; on failure it
// returns the NAK syndrome.
func (q *QP) checkRKey(rkey uint32, va uint64, n uint32, need device.Access) (*device.MR, rocev2.Syndrome) {
	mr, isRKey := q.dev.LookupKey(rkey)
	if mr == nil || !isRKey || mr.PD() != q.pd || !mr.Valid() || mr.Access()&need != need {
		return nil, rocev2.SyndromeNAKAccess
	}
	if va < mr.VA() || va-mr.VA() > uint64(mr.Len()) || uint64(n) > uint64(mr.Len())-(va-mr.VA()) {
		return nil, rocev2.SyndromeNAKAccess
	}
	return mr, 0
}

func (q *QP) nextResource() *resource {
	r := &q.resp
	res := &r.res[r.resNext]
	r.resNext = (r.resNext + 1) & (len(r.res) - 1)
	return res
}

func (q *QP) execRead(pkt *rocev2.Packet) {
	r := &q.resp
	reth := pkt.RETH()
	psn := pkt.BTH().PSN()
	var mr *device.MR
	if reth.Len() > 0 {
		var st rocev2.Syndrome
		if mr, st = q.checkRKey(reth.RKey(), reth.VA(), reth.Len(), device.AccessRemoteRead); st != 0 {
			q.respError(st, cq.RemAccessErr)
			return
		}
	}
	q.dev.Counters.RDMARecvs.Add(1)
	npkts := uint32(1)
	if n := (reth.Len() + uint32(q.mtu) - 1) / uint32(q.mtu); n > 1 {
		npkts = n
	}
	r.msn = (r.msn + 1) & 0xFFFFFF
	res := q.nextResource()
	*res = resource{
		used: true, firstPSN: psn, lastPSN: psn.Add(npkts - 1),
		va: reth.VA(), rkey: reth.RKey(), length: reth.Len(), mr: mr, msn: r.msn,
	}
	r.epsn = res.lastPSN.Add(1)
	q.sendReadResponses(res, psn, reth.VA(), reth.Len())
}

// sendReadResponses sends the responses of res from PSN psn on, for the
// length bytes at va.
func (q *QP) sendReadResponses(res *resource, psn rocev2.PSN, va uint64, length uint32) {
	mtu := uint32(q.mtu)
	f := &q.resp.fields
	for off := uint32(0); ; {
		n := min(mtu, length-off)
		last := psn == res.lastPSN
		first := psn == res.firstPSN
		*f = rocev2.Fields{PKey: 0xffff, DestQP: q.attr.DestQPN, PSN: psn, Syndrome: rocev2.SyndromeACKUnlimited, MSN: res.msn}
		switch {
		case first && last:
			f.Opcode = rocev2.RCReadResponseOnly
		case first:
			f.Opcode = rocev2.RCReadResponseFirst
		case last:
			f.Opcode = rocev2.RCReadResponseLast
		default:
			f.Opcode = rocev2.RCReadResponseMiddle
		}
		buf, _ := f.AppendHeaders(q.tx().Buffer(), int(n))
		if n > 0 {
			start := len(buf)
			buf = buf[:start+int(n)]
			if res.mr.CopyFrom(q.pd, va+uint64(off), buf[start:], device.AccessRemoteRead) != nil {
				// Deregistered or invalidated since: answer with a NAK.
				q.sendAck(rocev2.SyndromeNAKAccess, psn)
				return
			}
		}
		q.out.Commit(rocev2.AppendTrailer(buf, int(n)), q.raddr)
		q.responded(psn)
		off += n
		if last || off >= length {
			return
		}
		psn = psn.Add(1)
	}
}

func (q *QP) execAtomic(pkt *rocev2.Packet) {
	r := &q.resp
	a := pkt.AtomicETH()
	psn := pkt.BTH().PSN()
	mr, st := q.checkRKey(a.RKey(), a.VA(), 8, device.AccessRemoteAtomic)
	if st != 0 {
		q.respError(st, cq.RemAccessErr)
		return
	}
	swapAdd, cmp := a.SwapAdd(), a.Compare()
	isCAS := pkt.Opcode() == rocev2.RCCompareSwap
	orig, err := mr.Atomic(q.pd, a.VA(), func(v uint64) uint64 {
		if isCAS {
			if v == cmp {
				return swapAdd
			}
			return v
		}
		return v + swapAdd
	})
	if err != nil {
		if errors.Is(err, device.ErrMisalign) {
			q.respError(rocev2.SyndromeNAKInvalid, cq.RemInvReqErr)
		} else {
			q.respError(rocev2.SyndromeNAKAccess, cq.RemAccessErr)
		}
		return
	}
	q.dev.Counters.RDMARecvs.Add(1)
	r.msn = (r.msn + 1) & 0xFFFFFF
	res := q.nextResource()
	*res = resource{used: true, atomic: true, firstPSN: psn, lastPSN: psn, va: a.VA(), rkey: a.RKey(), orig: orig, msn: r.msn}
	r.epsn = psn.Add(1)
	q.sendAtomicAck(res)
}

func (q *QP) sendAtomicAck(res *resource) {
	f := &q.resp.fields
	*f = rocev2.Fields{
		Opcode: rocev2.RCAtomicAcknowledge, PKey: 0xffff, DestQP: q.attr.DestQPN, PSN: res.firstPSN,
		Syndrome: rocev2.SyndromeACKUnlimited, MSN: res.msn, Orig: res.orig,
	}
	buf, _ := f.Append(q.tx().Buffer(), nil)
	q.out.Commit(buf, q.raddr)
	q.responded(res.firstPSN)
}

// duplicate answers a request whose PSN is behind the expected one.
func (q *QP) duplicate(pkt *rocev2.Packet, psn rocev2.PSN) {
	op := pkt.Opcode()
	switch {
	case op.Is(rocev2.OpRead):
		reth := pkt.RETH()
		for i := range q.resp.res {
			res := &q.resp.res[i]
			if !res.used || res.atomic || !psn.InRange(res.firstPSN, res.lastPSN) || res.rkey != reth.RKey() {
				continue
			}
			// The retry asks for the rest of the original READ: the
			// same bytes, from this PSN's offset on.
			off := uint64(psn.Sub(res.firstPSN)) * uint64(q.mtu)
			if reth.VA() != res.va+off || uint64(reth.Len())+off != uint64(res.length) {
				if q.trace != nil {
					q.trace("dup READ psn %#x: does not match resource %#x-%#x", psn, res.firstPSN, res.lastPSN)
				}
				return
			}
			if res.mr != nil && !res.mr.Valid() {
				return
			}
			q.sendReadResponses(res, psn, reth.VA(), reth.Len())
			return
		}
		if q.trace != nil {
			q.trace("dup READ psn %#x: no resource", psn)
		}
	case op.Is(rocev2.OpAtomic):
		for i := range q.resp.res {
			res := &q.resp.res[i]
			if res.used && res.atomic && res.firstPSN == psn {
				q.sendAtomicAck(res)
				return
			}
		}
		if q.trace != nil {
			q.trace("dup atomic psn %#x: no resource", psn)
		}
	default:
		// A SEND/WRITE we already executed: acknowledge again what we have
		// (C9-105; rxe answers every duplicate), whether or not this packet
		// asked. A go-back-N retry whose AckReq packets are lost again (a
		// socket buffer that overflows at the same point of every burst)
		// would otherwise never learn what arrived, and run out of retries
		// while the responder holds it all. Owed, not sent: a retry's many
		// duplicates cost one ACK per receive batch.
		q.oweACK(q.resp.epsn.Add(^uint32(0)))
	}
}

// sendAck builds an ACK or NAK (AETH syndrome syn) for psn now.
func (q *QP) sendAck(syn rocev2.Syndrome, psn rocev2.PSN) {
	if syn.Kind() == rocev2.KindNAK {
		q.dev.Counters.SentNAKs.Add(1)
	}
	if syn.Kind() == rocev2.KindACK {
		q.responded(psn)
	} else {
		q.responded(psn.Add(^uint32(0))) // a NAK acknowledges what precedes psn
	}
	f := &q.resp.fields
	*f = rocev2.Fields{
		Opcode: rocev2.RCAcknowledge, PKey: 0xffff, DestQP: q.attr.DestQPN, PSN: psn,
		Syndrome: syn, MSN: q.resp.msn,
	}
	buf, _ := f.Append(q.tx().Buffer(), nil)
	q.out.Commit(buf, q.raddr)
}
