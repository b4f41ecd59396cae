package qp

// The UC responder: RC's packet sequence without its reliability. Nothing
// is acknowledged, nothing retransmitted, and a message that cannot be
// taken whole is dropped silently (IBTA's class D errors), in rxe's order:
//
//	PSN → op sequence → access → receive WQE → length → rkey → place → complete
//
//   - PSN: a packet whose PSN is not the expected one breaks the message in
//     progress: it and the rest of that message are dropped (out_of_seq_request,
//     rcvd_drop_seq) until a FIRST or ONLY packet, whatever its PSN, starts
//     the next message clean.
//   - Op sequence: a MIDDLE or LAST without a FIRST is dropped likewise; a
//     FIRST or ONLY inside a message abandons that message and starts anew.
//     (rxe drops that new FIRST too, losing a second message; IBTA lets it
//     start the next one, which is what goroce does.)
//   - A WRITE without remote write access or with a bad rkey
//     (rcvd_drop_access), a SEND with no receive WQE (rcvd_drop_no_wqe), a
//     packet that breaks the length rules or overflows the receive buffer
//     (rcvd_drop_len): the message is dropped.
//   - A receive WQE that took part of a dropped message is used again,
//     from its start, by the next one: nothing is completed for a message
//     that did not arrive whole. What a dropped WRITE placed before the
//     loss stays placed (the region is open to the peer's writes anyway).

import (
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// respondUC handles one UC request packet. The caller holds q.mu and has
// checked the source address and the QP's state.
func (q *QP) respondUC(pkt *rocev2.Packet) {
	r := &q.resp
	op := pkt.Opcode()
	psn := pkt.BTH().PSN()
	first := op.Is(rocev2.OpFirst)

	// CHK_PSN
	if psn != r.epsn {
		q.dev.Counters.OutOfSeqRequest.Add(1)
	}
	if (r.dropMsg || psn != r.epsn) && !first {
		q.dropUC(&q.dev.Counters.RcvdDropSeq)
		return
	}

	// CHK_OP_SEQ
	switch {
	case r.inSend && !first && op.Is(rocev2.OpSend), r.inWrite && !first && op.Is(rocev2.OpWrite):
		// continues the message in progress
	case !first:
		q.dropUC(&q.dev.Counters.RcvdDropSeq) // a MIDDLE or LAST of no message
		return
	default:
		q.abandonUC() // a new message: whatever was in progress is lost
	}
	r.dropMsg = false

	// CHK_OP_VALID
	if op.Is(rocev2.OpWrite) && q.attr.AccessFlags&device.AccessRemoteWrite == 0 {
		q.dropUC(&q.dev.Counters.RcvdDropAccess)
		return
	}

	// CHK_RESOURCE: a SEND takes its WQE at its first packet, a WRITE
	// with immediate at its last. A WQE left by a dropped message is
	// used again.
	if op.ConsumesRecvWQE() {
		if r.rwqe == nil {
			r.rwqe = q.takeRecv()
		}
		if r.rwqe == nil {
			q.dropUC(&q.dev.Counters.RcvdDropNoWQE)
			return
		}
		if r.rwqe.localErr != cq.Success {
			q.failRecv(r.rwqe.localErr) // rxe's class A: the QP goes to ERR
			q.enterError()
			return
		}
		if op.Is(rocev2.OpSend) {
			r.recvOff = 0
			r.recvCur = sglCursor{sgl: r.rwqe.sgl, mrs: r.rwqe.mrs}
		}
	}

	// CHK_LENGTH (rxe_resp_check_length, and C9-94 for the RETH)
	n, last := len(pkt.Payload()), op.Is(rocev2.OpLast)
	switch {
	case first && last && n > q.mtu, // ONLY
		!last && n != q.mtu,                     // FIRST, MIDDLE
		!first && last && (n == 0 || n > q.mtu): // LAST
		q.dropUC(&q.dev.Counters.RcvdDropLen)
		return
	}
	if reth := pkt.RETH(); reth != nil && reth.Len() > 1<<31 {
		q.dropUC(&q.dev.Counters.RcvdDropLen)
		return
	}

	if op.Is(rocev2.OpSend) {
		q.placeSendUC(pkt)
	} else {
		q.placeWriteUC(pkt)
	}
}

// placeSendUC places a UC SEND packet into the receive WQE in progress and
// completes it at the message's end.
func (q *QP) placeSendUC(pkt *rocev2.Packet) {
	r := &q.resp
	op := pkt.Opcode()
	data := pkt.Payload()
	if r.recvOff+uint64(len(data)) > r.rwqe.capacity {
		q.dropUC(&q.dev.Counters.RcvdDropLen)
		return
	}
	if err := r.recvCur.scatter(q.pd, data); err != nil {
		q.failRecv(cq.LocProtErr) // the region went away since the post
		q.enterError()
		return
	}
	r.recvOff += uint64(len(data))
	r.epsn = pkt.BTH().PSN().Add(1)
	r.inSend = !op.Is(rocev2.OpLast)
	if op.Is(rocev2.OpLast) {
		wc := cq.WC{Opcode: cq.OpRecv, ByteLen: uint32(r.recvOff)}
		if imm := pkt.ImmDt(); imm != nil {
			wc.Imm, wc.Flags = imm.Imm(), cq.WithImm
		}
		q.finishRecv(&wc, pkt.BTH().SE())
	}
}

// placeWriteUC places a UC RDMA WRITE packet; a WRITE with immediate
// completes its receive WQE at the end.
func (q *QP) placeWriteUC(pkt *rocev2.Packet) {
	r := &q.resp
	op := pkt.Opcode()
	data := pkt.Payload()
	if reth := pkt.RETH(); reth != nil {
		r.wva, r.wlen, r.wresid, r.wmr = reth.VA(), reth.Len(), reth.Len(), nil
		if reth.Len() > 0 {
			mr, st := q.checkRKey(reth.RKey(), reth.VA(), reth.Len(), device.AccessRemoteWrite)
			if st != 0 {
				q.dropUC(&q.dev.Counters.RcvdDropAccess)
				return
			}
			r.wmr = mr
		}
		q.dev.Counters.RDMARecvs.Add(1)
	}
	if uint32(len(data)) > r.wresid || (op.Is(rocev2.OpLast) && uint32(len(data)) != r.wresid) {
		q.dropUC(&q.dev.Counters.RcvdDropLen) // the payload does not add up to the RETH length
		return
	}
	if len(data) > 0 {
		if err := r.wmr.CopyTo(q.pd, r.wva, data, device.AccessRemoteWrite); err != nil {
			q.dropUC(&q.dev.Counters.RcvdDropAccess) // deregistered or invalidated since the FIRST
			return
		}
	}
	r.wva += uint64(len(data))
	r.wresid -= uint32(len(data))
	r.epsn = pkt.BTH().PSN().Add(1)
	r.inWrite = !op.Is(rocev2.OpLast)
	if op.Is(rocev2.OpLast) && pkt.ImmDt() != nil {
		wc := cq.WC{Opcode: cq.OpRecvRDMAWithImm, ByteLen: r.wlen, Imm: pkt.ImmDt().Imm(), Flags: cq.WithImm}
		q.finishRecv(&wc, pkt.BTH().SE())
	}
}

// dropUC drops the packet and the rest of its message, counting it in c.
func (q *QP) dropUC(c interface{ Add(uint64) uint64 }) {
	c.Add(1)
	q.abandonUC()
	q.resp.dropMsg = true
}

// abandonUC forgets the message in progress. Its receive WQE, if it took
// one, stays for the next message, which fills it from the start.
func (q *QP) abandonUC() {
	r := &q.resp
	r.inSend, r.inWrite = false, false
	r.recvOff = 0
	r.wmr = nil
}
