package qp

// The UD responder: every UD message is one packet (SEND_ONLY, with or
// without immediate data), taken from anyone whose Q_Key matches, and never
// answered. In rxe's order:
//
//	Q_Key → receive WQE → length (GRH area + payload fit) → place → complete
//
//   - A Q_Key other than the QP's is dropped and counted (qkey_viol).
//   - No receive WQE, or one too small for the GRH area and the payload:
//     the packet is dropped and counted (rcvd_drop_no_wqe, rcvd_drop_len);
//     a WQE of the QP's own queue stays for the next packet. One taken
//     from an SRQ is gone from it already, so it completes with
//     REM_INV_REQ_ERR, as rxe's class E error.
//   - The receive buffer gets the 40-byte GRH area first (the IP header
//     the packet arrived in, as rxe fills it: rocev2.Flow.PutGRH), then
//     the payload; the completion counts both and carries the sender's QP
//     number, the GRH flag and any immediate data.

import (
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// respondUD handles one UD packet. The caller holds q.mu and has checked
// the opcode's transport and the QP's state.
func (q *QP) respondUD(pkt *rocev2.Packet, dg *backend.Incoming) {
	r := &q.resp
	deth := pkt.DETH() // every UD opcode carries one: Parse checked its room
	if deth.QKey() != q.attr.QKey {
		q.dev.Counters.QKeyViol.Add(1)
		return
	}
	if r.rwqe = q.takeRecv(); r.rwqe == nil {
		q.dev.Counters.RcvdDropNoWQE.Add(1)
		return
	}
	w := r.rwqe
	if w.localErr != cq.Success {
		// A WQE whose SGL failed its checks at post: rxe's class A
		// error, which takes the QP to ERR.
		q.failRecv(w.localErr)
		q.enterError()
		return
	}
	data := pkt.Payload()
	if uint64(rocev2.GRHLen)+uint64(len(data)) > w.capacity {
		q.dev.Counters.RcvdDropLen.Add(1)
		if q.srq != nil {
			q.failRecv(cq.RemInvReqErr)
		} else {
			r.rwqe = nil // it stays at the head of the queue
		}
		return
	}
	fl := rocev2.NewFlow(dg.Src, q.dev.LocalAddr())
	fl.IPv4ID, fl.TTL, fl.TOS = dg.IPv4ID, dg.TTL, dg.TOS
	fl.FlowLabel = 0 // rxe sends and reports flow label 0
	fl.PutGRH(r.grh[:], len(dg.Buf))
	r.recvCur = sglCursor{sgl: w.sgl, mrs: w.mrs}
	if r.recvCur.scatter(q.pd, r.grh[:]) != nil || r.recvCur.scatter(q.pd, data) != nil {
		// The region went away since the post: rxe's malformed WQE.
		q.failRecv(cq.LocProtErr)
		q.enterError()
		return
	}
	wc := cq.WC{
		Opcode: cq.OpRecv, Flags: cq.WithGRH, SrcQP: deth.SrcQP(),
		ByteLen: uint32(rocev2.GRHLen + len(data)),
	}
	if imm := pkt.ImmDt(); imm != nil {
		wc.Imm, wc.Flags = imm.Imm(), cq.WithGRH|cq.WithImm
	}
	q.completeRecv(&wc, pkt.BTH().SE())
}
