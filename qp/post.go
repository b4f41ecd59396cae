package qp

import (
	"fmt"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/device"
)

// PostSend queues send work requests (ibv_post_send). It returns how many
// were queued; on an error the request at that index and the ones after it
// were not. In RTS the requester starts sending before PostSend returns. In
// ERR the requests complete at once with WR_FLUSH_ERR.
func (q *QP) PostSend(wrs []SendWR) (int, error) {
	q.mu.Lock()
	defer q.unlock()
	switch q.state {
	case RTS, SQD, SQE, Err:
	case stateDestroyed:
		return 0, fmt.Errorf("qp %#x: post send: %w", q.qpn, ErrDestroyed)
	default:
		return 0, fmt.Errorf("qp %#x: post send in %v: %w (move the QP to RTS first)", q.qpn, q.state, ErrState)
	}
	n := 0
	var err error
	for i := range wrs {
		if err = q.queueSend(&wrs[i]); err != nil {
			if err != ErrQueueFull { // a full queue is flow control, not a bug: keep it cheap
				err = fmt.Errorf("qp %#x: post send wr %d (wr_id %#x): %w", q.qpn, i, wrs[i].WRID, err)
			}
			break
		}
		n++
	}
	if q.state == Err {
		q.flushSQ()
		return n, err
	}
	if n > 0 {
		q.posted = true // unlock sends, ending a poller's hold (Device.Posted)
		q.runRequester()
	}
	return n, err
}

func (q *QP) queueSend(wr *SendWR) error {
	if q.sq.full() {
		return ErrQueueFull
	}
	if !q.supports(wr.Opcode) {
		return fmt.Errorf("%w: opcode %v is not supported on %v", ErrBadWR, wr.Opcode, q.typ)
	}
	inline := wr.Flags&SendInline != 0
	if q.typ == UD {
		if err := q.checkUD(wr, inline); err != nil {
			return err
		}
	}
	if inline && (wr.Opcode.isReadLike() || wr.Opcode == WRLocalInv) {
		return fmt.Errorf("%w: %v cannot be inline", ErrBadWR, wr.Opcode)
	}
	if inline && len(wr.Inline) > q.attr.Cap.MaxInlineData {
		return fmt.Errorf("%w: %d inline bytes above max_inline_data %d", ErrBadWR, len(wr.Inline), q.attr.Cap.MaxInlineData)
	}
	if !inline && len(wr.SGL) > q.attr.Cap.MaxSendSGE {
		return fmt.Errorf("%w: %d SGEs above max_send_sge %d", ErrBadWR, len(wr.SGL), q.attr.Cap.MaxSendSGE)
	}
	w := q.sq.at(q.sq.tail)
	*w = sendWQE{
		sgl: w.sgl[:0], mrs: w.mrs[:0], inline: w.inline[:0],
		wrid: wr.WRID, entry: wr.Entry, op: wr.Opcode, flags: wr.Flags,
		signaled: q.sigAll || wr.Flags&SendSignaled != 0,
		imm:      wr.Imm, raddr: wr.RemoteAddr, rkey: wr.RKey,
		compareAdd: wr.CompareAdd, swap: wr.Swap, isInline: inline,
	}
	if q.typ == UD {
		w.udAddr, w.udQPN, w.udQKey = wr.AH.addr, wr.RemoteQPN, wr.RemoteQKey
		w.udHop, w.udTClass = wr.AH.attr.HopLimit, wr.AH.attr.TClass
		if w.udQKey&0x80000000 != 0 {
			w.udQKey = q.attr.QKey
		}
	}
	if inline {
		w.inline = append(w.inline, wr.Inline...)
		w.length = uint32(len(wr.Inline))
	} else {
		w.sgl = append(w.sgl, wr.SGL...)
		w.mrs = w.mrs[:len(w.sgl)]
		need := device.Access(0)
		if wr.Opcode.isReadLike() {
			need = device.AccessLocalWrite // responses land in these buffers
		}
		total, st := resolveSGL(q.dev, q.pd, w.sgl, w.mrs, need)
		if total > device.MaxMsgSize {
			st = cq.LocLenErr
		}
		w.length, w.localErr = uint32(total), st
		if wr.Opcode.isAtomic() && st == cq.Success && total != 8 {
			w.localErr = cq.LocLenErr // an atomic returns exactly 8 bytes
		}
	}
	q.sq.tail++
	return nil
}

// supports reports whether the QP's transport has the operation: UC has
// SEND and RDMA WRITE (with immediate or not), UD only SEND.
func (q *QP) supports(op WROpcode) bool {
	switch op {
	case WRSend, WRSendWithImm:
		return true
	case WRRDMAWrite, WRRDMAWriteWithImm:
		return q.typ != UD
	case WRSendWithInv, WRRDMARead, WRAtomicCmpAndSwp, WRAtomicFetchAdd, WRLocalInv:
		return q.typ == RC
	}
	return false
}

// checkUD checks what a UD send needs: an address handle of the QP's PD, a
// 24-bit QP number, and a message that fits one packet of the port's MTU
// (larger ones fail here; rxe silently drops them and reports success).
func (q *QP) checkUD(wr *SendWR, inline bool) error {
	if wr.AH == nil {
		return fmt.Errorf("%w: a UD send needs an address handle (SendWR.AH)", ErrBadWR)
	}
	if wr.AH.pd != q.pd {
		return fmt.Errorf("%w: the address handle belongs to another PD", ErrBadWR)
	}
	if wr.RemoteQPN&^0xFFFFFF != 0 {
		return fmt.Errorf("%w: remote QPN %#x does not fit 24 bits", ErrBadWR, wr.RemoteQPN)
	}
	n := uint64(len(wr.Inline))
	if !inline {
		n = 0
		for _, s := range wr.SGL {
			n += uint64(s.Length)
		}
	}
	if n > uint64(q.mtu) {
		return fmt.Errorf("%w: a UD message is one packet: %d bytes above the port's MTU %d", ErrBadWR, n, q.mtu)
	}
	return nil
}

// PostRecv queues receive work requests (ibv_post_recv). In ERR they
// complete at once with WR_FLUSH_ERR.
func (q *QP) PostRecv(wrs []RecvWR) (int, error) {
	q.mu.Lock()
	defer q.unlock()
	switch q.state {
	case stateDestroyed:
		return 0, fmt.Errorf("qp %#x: post recv: %w", q.qpn, ErrDestroyed)
	case Reset:
		return 0, fmt.Errorf("qp %#x: post recv in RESET: %w (move the QP to INIT first)", q.qpn, ErrState)
	}
	if q.srq != nil {
		return 0, fmt.Errorf("qp %#x: post recv: %w: the QP takes its receives from an SRQ (post them there)", q.qpn, ErrBadWR)
	}
	n := 0
	for i := range wrs {
		wr := &wrs[i]
		if q.rq.full() {
			return n, ErrQueueFull
		}
		if len(wr.SGL) > q.attr.Cap.MaxRecvSGE {
			return n, fmt.Errorf("qp %#x: post recv wr %d: %w: %d SGEs above max_recv_sge %d", q.qpn, i, ErrBadWR, len(wr.SGL), q.attr.Cap.MaxRecvSGE)
		}
		w := q.rq.at(q.rq.tail)
		w.wrid, w.entry = wr.WRID, wr.Entry
		w.sgl = append(w.sgl[:0], wr.SGL...)
		w.mrs = w.mrs[:len(w.sgl)]
		w.capacity, w.localErr = resolveSGL(q.dev, q.pd, w.sgl, w.mrs, device.AccessLocalWrite)
		q.rq.tail++
		n++
	}
	if q.state == Err {
		q.flushRQ()
	}
	return n, nil
}
