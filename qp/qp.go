// Package qp implements goroce's queue pairs: the verbs-style API (Create,
// Modify, Query, PostSend, PostRecv, Destroy), shared receive queues (SRQ),
// address handles, and the RC, UC and UD transports as rxe implements them.
// The requester (requester.go) turns send work requests into packets for
// all three; for RC the completer (completer.go) turns ACKs, NAKs and
// responses into completions and drives go-back-N retransmission, and the
// responder (responder.go) executes inbound requests and answers them. UC
// (uc.go) and UD (ud.go) have responders of their own and no completer: a
// send completes when its last packet is built, and what arrives is
// placed or dropped, never answered.
//
// Concurrency: all of a QP's state is guarded by its mutex. Packets arrive
// on the device's receive path, which calls HandlePacket inline; posts run
// the requester inline on the poster's goroutine; timers run on the device's
// timer goroutine. Every packet is built into the device's outbox, which
// sends in build order, so a QP's packets leave in PSN order. Every locked
// section ends in unlock (unlock.go), which delivers CQ and async events
// only after the lock is released.
package qp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/device"
)

// SendWindow bounds the PSNs a requester has in flight: the send window.
// rxe uses 128 (RXE_MAX_UNACKED_PSNS); the window is not visible on the
// wire, and on a UDP socket, where a round trip includes two system calls
// and a scheduler wake-up, 128 packets of 4 KiB leave the pipe idle part of
// the time (two-process WRITE, 64 KiB: 16.4 Gbit/s at 128, 17.7 at 512).
// 512 packets of the largest MTU (2 MiB) stay well inside the UDP backend's
// 8 MiB socket buffers, so a window does not overrun a receiver.
const SendWindow = 512

const maxUnackedPSNs = SendWindow

// maxPktsPerAck is how many packets may go without AckReq
// (RXE_MAX_PKT_PER_ACK), so that long messages keep the window moving.
const maxPktsPerAck = 64

// InitAttr configures a new QP (ibv_qp_init_attr).
type InitAttr struct {
	Type   Type
	SendCQ *cq.CQ
	RecvCQ *cq.CQ
	Cap    Cap
	// SigAll makes every send work request signaled (sq_sig_all).
	SigAll bool
	// OnAsyncEvent, if set, receives the QP's asynchronous events.
	OnAsyncEvent func(Event)
	// RetryCnt7Infinite treats retry_cnt 7 as "retry forever", as rxe does.
	// IBTA makes it a plain count; only rnr_retry 7 is infinite there.
	RetryCnt7Infinite bool
	// SRQ, if set, is the shared receive queue the QP takes its receive
	// WQEs from (it must belong to the QP's PD); Cap.MaxRecvWR and
	// MaxRecvSGE are then ignored and PostRecv on the QP fails.
	SRQ *SRQ
}

// EventType is a QP asynchronous event (ibv_event_type subset).
type EventType uint8

const (
	EventQPFatal        EventType = 1  // IBV_EVENT_QP_FATAL: the QP went to ERR
	EventSQDrained      EventType = 5  // IBV_EVENT_SQ_DRAINED
	EventCQError        EventType = 9  // the QP's CQ overflowed
	EventLastWQEReached EventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED: an SRQ QP in ERR takes no more WQEs
)

// Event is an asynchronous event of a QP.
type Event struct {
	Type EventType
	QPN  uint32
	Err  error
}

// QP is a queue pair.
type QP struct {
	dev    *device.Device
	pd     *device.PD
	qpn    uint32
	typ    Type
	sendCQ *cq.CQ
	recvCQ *cq.CQ
	srq    *SRQ
	tr     rocev2.Opcode // the transport's opcode bits (rocev2.TransportRC, UC, UD)
	sigAll bool
	onEvt  func(Event)
	retry7 bool

	mu    sync.Mutex
	state State
	attr  Attr
	mtu   int
	raddr netip.AddrPort

	sq      sendQueue
	rq      recvQueue
	req     requester
	comp    completer
	resp    responder
	retryTm device.Timer
	rnrTm   device.Timer
	sqdSent bool

	// What the current locked section built and raised (unlock.go).
	out    *device.Outbox // the device's outbox, if taken (q.tx)
	posted bool           // the section is a post: it ends a poller's hold
	nt     notices

	// trace, when set by a test, records transport events.
	trace func(format string, args ...any)
}

// Errors returned by posts.
var (
	ErrQueueFull = errors.New("qp: work queue full: poll the CQ for completions before posting more, or create the QP with deeper queues")
	ErrBadWR     = errors.New("qp: invalid work request")
	ErrState     = errors.New("qp: operation not allowed in the QP's state")
	ErrDestroyed = errors.New("qp: destroyed")
)

// Create makes a QP in pd. It starts in RESET.
func Create(pd *device.PD, ia InitAttr) (*QP, error) {
	dev := pd.Device()
	var tr rocev2.Transport
	switch ia.Type {
	case RC:
		tr = rocev2.TransportRC
	case UC:
		tr = rocev2.TransportUC
	case UD:
		tr = rocev2.TransportUD
	default:
		return nil, fmt.Errorf("qp: create: unknown QP type %d (RC, UC or UD)", ia.Type)
	}
	if ia.SendCQ == nil || ia.RecvCQ == nil {
		return nil, errors.New("qp: create: send and receive CQs are required (they may be the same CQ)")
	}
	c := &ia.Cap
	if ia.SRQ != nil {
		if ia.SRQ.pd != pd {
			return nil, errors.New("qp: create: the SRQ belongs to another PD (goroce needs the QP's)")
		}
		c.MaxRecvWR, c.MaxRecvSGE = 0, 0
	}
	if c.MaxSendWR < 1 || c.MaxSendWR > device.MaxQPWR || (ia.SRQ == nil && (c.MaxRecvWR < 1 || c.MaxRecvWR > device.MaxQPWR)) {
		return nil, fmt.Errorf("qp: create: max_send_wr %d / max_recv_wr %d out of range 1..%d", c.MaxSendWR, c.MaxRecvWR, device.MaxQPWR)
	}
	if c.MaxSendSGE == 0 {
		c.MaxSendSGE = 1
	}
	if c.MaxRecvSGE == 0 && ia.SRQ == nil {
		c.MaxRecvSGE = 1
	}
	if c.MaxSendSGE > device.MaxSGE || c.MaxRecvSGE > device.MaxSGE {
		return nil, fmt.Errorf("qp: create: max SGEs %d/%d above the device limit %d", c.MaxSendSGE, c.MaxRecvSGE, device.MaxSGE)
	}
	if c.MaxInlineData > device.MaxInlineData {
		return nil, fmt.Errorf("qp: create: max_inline_data %d above the device limit %d", c.MaxInlineData, device.MaxInlineData)
	}
	q := &QP{
		dev: dev, pd: pd, typ: ia.Type, sendCQ: ia.SendCQ, recvCQ: ia.RecvCQ, srq: ia.SRQ,
		tr: rocev2.Opcode(tr), sigAll: ia.SigAll, onEvt: ia.OnAsyncEvent, retry7: ia.RetryCnt7Infinite,
		state: Reset,
	}
	q.attr.Cap = *c
	q.defaultMTU()
	q.sq.init(c.MaxSendWR, c.MaxSendSGE, c.MaxInlineData)
	q.rq.init(c.MaxRecvWR, c.MaxRecvSGE)
	if q.srq != nil {
		q.resp.srqWQE.sgl = make([]SGE, 0, q.srq.maxSGE)
		q.resp.srqWQE.mrs = make([]*device.MR, 0, q.srq.maxSGE)
		if err := q.srq.attach(); err != nil {
			return nil, err
		}
	}
	q.retryTm.Init(q.onRetryTimer)
	q.rnrTm.Init(q.onRNRTimer)
	qpn, err := dev.AddQP(q)
	if err != nil {
		if q.srq != nil {
			q.srq.detach()
		}
		return nil, err
	}
	q.qpn = qpn
	return q, nil
}

// defaultMTU sets the MTU a QP has until RTR: 256 for RC and UC (their
// path MTU is an RTR attribute), the port's active MTU for UD, whose
// messages are single packets up to it (rxe's port mtu_cap).
func (q *QP) defaultMTU() {
	q.attr.PathMTU = rocev2.MTU256
	if q.typ == UD {
		q.attr.PathMTU = q.dev.Port().ActiveMTU
	}
	q.mtu = q.attr.PathMTU.Bytes()
}

// SRQ returns the shared receive queue the QP was created on, or nil.
func (q *QP) SRQ() *SRQ { return q.srq }

// QPN returns the QP number.
func (q *QP) QPN() uint32 { return q.qpn }

// Type returns the transport type.
func (q *QP) Type() Type { return q.typ }

// State returns the current state.
func (q *QP) State() State {
	q.mu.Lock()
	defer q.unlock()
	return q.state
}

// Query returns the QP's attributes, with State and CurState current.
func (q *QP) Query() Attr {
	q.mu.Lock()
	defer q.unlock()
	a := q.attr
	a.State, a.CurState = q.state, q.state
	a.SQPSN = q.req.psn
	a.RQPSN = q.resp.epsn
	a.SQDraining = q.state == SQD && !q.sqdSent
	return a
}

// Modify changes the QP's attributes and state (ibv_modify_qp): mask says
// which fields of attr apply, and must satisfy the rules of the transition.
func (q *QP) Modify(attr *Attr, mask AttrMask) error {
	q.mu.Lock()
	defer q.unlock()
	if q.state == stateDestroyed {
		return fmt.Errorf("qp %#x: modify: %w", q.qpn, ErrDestroyed)
	}
	to, err := checkTransition(q.typ, q.qpn, q.state, attr, mask)
	if err != nil {
		return err
	}
	if err := q.validate(attr, mask); err != nil {
		return fmt.Errorf("qp %#x: modify %v→%v: %w", q.qpn, q.state, to, err)
	}
	q.apply(attr, mask)
	from := q.state
	switch {
	case to == Reset:
		q.reset()
	case to == Err:
		q.enterError()
	default:
		q.state = to
	}
	if from == RTR && to == RTS {
		q.req.start(q.attr.SQPSN)
		q.comp.start(q)
	}
	if to == RTS && (from == SQD || from == SQE) {
		q.runRequester()
	}
	if to == SQD {
		q.sqdSent = false
		q.checkDrained()
	}
	return nil
}

// validate checks attribute values (ranges), not which ones are present.
func (q *QP) validate(a *Attr, mask AttrMask) error {
	if mask&MaskPathMTU != 0 {
		if !a.PathMTU.Valid() {
			return fmt.Errorf("path MTU %d is not an IB MTU (1..5)", a.PathMTU)
		}
		if a.PathMTU > q.dev.Port().ActiveMTU {
			return fmt.Errorf("path MTU %v above the port's active MTU %v", a.PathMTU, q.dev.Port().ActiveMTU)
		}
	}
	if mask&MaskPort != 0 && a.Port != 1 {
		return fmt.Errorf("port %d does not exist (the device has port 1)", a.Port)
	}
	if mask&MaskPKeyIndex != 0 && a.PKeyIndex != 0 {
		return fmt.Errorf("P_Key index %d out of range (the table has 1 entry)", a.PKeyIndex)
	}
	if mask&MaskAV != 0 {
		if err := validateAH(q.dev, &a.AH); err != nil {
			return err
		}
	}
	if mask&MaskTimeout != 0 && a.Timeout > 31 {
		return fmt.Errorf("timeout %d out of range 0..31", a.Timeout)
	}
	if mask&MaskRetryCnt != 0 && a.RetryCnt > 7 {
		return fmt.Errorf("retry_cnt %d out of range 0..7", a.RetryCnt)
	}
	if mask&MaskRNRRetry != 0 && a.RNRRetry > 7 {
		return fmt.Errorf("rnr_retry %d out of range 0..7", a.RNRRetry)
	}
	if mask&MaskMinRNRTimer != 0 && a.MinRNRTimer > 31 {
		return fmt.Errorf("min_rnr_timer %d out of range 0..31", a.MinRNRTimer)
	}
	if mask&MaskMaxQPRdAtomic != 0 && int(a.MaxRdAtomic) > device.MaxQPRdAtom {
		return fmt.Errorf("max_rd_atomic %d above the device limit %d", a.MaxRdAtomic, device.MaxQPRdAtom)
	}
	if mask&MaskMaxDestRdAtomic != 0 && int(a.MaxDestRdAtomic) > device.MaxQPRdAtom {
		return fmt.Errorf("max_dest_rd_atomic %d above the device limit %d", a.MaxDestRdAtomic, device.MaxQPRdAtom)
	}
	if mask&MaskSQPSN != 0 && !a.SQPSN.Valid() {
		return fmt.Errorf("sq_psn %#x does not fit 24 bits", uint32(a.SQPSN))
	}
	if mask&MaskRQPSN != 0 && !a.RQPSN.Valid() {
		return fmt.Errorf("rq_psn %#x does not fit 24 bits", uint32(a.RQPSN))
	}
	if mask&MaskDestQPN != 0 && a.DestQPN&^0xFFFFFF != 0 {
		return fmt.Errorf("dest_qp_num %#x does not fit 24 bits", a.DestQPN)
	}
	return nil
}

func (q *QP) apply(a *Attr, mask AttrMask) {
	t := &q.attr
	if mask&MaskAccessFlags != 0 {
		t.AccessFlags = a.AccessFlags
	}
	if mask&MaskPKeyIndex != 0 {
		t.PKeyIndex = a.PKeyIndex
	}
	if mask&MaskPort != 0 {
		t.Port = a.Port
	}
	if mask&MaskQKey != 0 {
		t.QKey = a.QKey
	}
	if mask&MaskAV != 0 {
		t.AH = a.AH
		q.raddr = a.AH.Addr()
	}
	if mask&MaskPathMTU != 0 {
		t.PathMTU = a.PathMTU
		q.mtu = a.PathMTU.Bytes()
	}
	if mask&MaskTimeout != 0 {
		t.Timeout = a.Timeout
	}
	if mask&MaskRetryCnt != 0 {
		t.RetryCnt = a.RetryCnt
		q.comp.retryLeft = a.RetryCnt
	}
	if mask&MaskRNRRetry != 0 {
		t.RNRRetry = a.RNRRetry
		q.comp.rnrLeft = a.RNRRetry
	}
	if mask&MaskRQPSN != 0 {
		t.RQPSN = a.RQPSN
		q.resp.epsn = a.RQPSN
		q.resp.acked = a.RQPSN.Add(^uint32(0))
	}
	if mask&MaskSQPSN != 0 {
		t.SQPSN = a.SQPSN
	}
	if mask&MaskMaxQPRdAtomic != 0 {
		t.MaxRdAtomic = a.MaxRdAtomic
	}
	if mask&MaskMaxDestRdAtomic != 0 {
		t.MaxDestRdAtomic = a.MaxDestRdAtomic
		q.resp.initResources(int(a.MaxDestRdAtomic))
	}
	if mask&MaskMinRNRTimer != 0 {
		t.MinRNRTimer = a.MinRNRTimer
	}
	if mask&MaskDestQPN != 0 {
		t.DestQPN = a.DestQPN
	}
}

// stateDestroyed marks a destroyed QP (not an IBTA state).
const stateDestroyed State = 0xFF

// Destroy removes the QP from its device. Outstanding work requests are
// discarded without completions; no completion for this QP is pushed after
// Destroy returns.
func (q *QP) Destroy() error {
	q.mu.Lock()
	defer q.unlock()
	if q.state == stateDestroyed {
		return fmt.Errorf("qp %#x: destroy: %w", q.qpn, ErrDestroyed)
	}
	q.settleACK()
	q.dev.RemoveQP(q.qpn)
	q.stopTimers()
	q.sq.clear()
	q.rq.clear()
	q.resp.srqWQE.entry = nil
	q.state = stateDestroyed
	if q.srq != nil {
		q.srq.detach()
	}
	return nil
}

func (q *QP) stopTimers() {
	q.dev.Timers().Stop(&q.retryTm)
	q.dev.Timers().Stop(&q.rnrTm)
}

// reset discards all work and protocol state without completions (→RESET).
func (q *QP) reset() {
	q.settleACK()
	q.stopTimers()
	q.sq.clear()
	q.rq.clear()
	q.req = requester{}
	q.comp = completer{}
	q.resp.reset()
	q.state = Reset
	cap := q.attr.Cap
	q.attr = Attr{Cap: cap}
	q.defaultMTU()
}

// enterError moves the QP to ERR and completes every outstanding work
// request, signaled or not, exactly once with WR_FLUSH_ERR.
func (q *QP) enterError() {
	if q.state == Err {
		return
	}
	q.settleACK()
	q.state = Err
	q.stopTimers()
	q.flushSQ()
	q.flushRQ()
	q.event(Event{Type: EventQPFatal, QPN: q.qpn})
}

func (q *QP) flushSQ() {
	for q.sq.head != q.sq.tail {
		w := q.sq.at(q.sq.head)
		st := cq.WRFlushErr
		if w.state == wqeDone {
			st = w.status // finished (the failing WQE, or a local op): its own status
		}
		q.retire(w, st)
		q.sq.head++
	}
	q.sq.req = q.sq.head
}

func (q *QP) flushRQ() {
	if q.srq != nil {
		// The WQEs still on the SRQ belong to the other QPs; only one
		// this QP took is flushed.
		q.failRecv(cq.WRFlushErr)
		q.event(Event{Type: EventLastWQEReached, QPN: q.qpn})
		return
	}
	q.resp.rwqe = nil // the receive in progress is the ring's head: flushed below
	for q.rq.head != q.rq.tail {
		w := q.rq.at(q.rq.head)
		wc := cq.WC{WRID: w.wrid, Entry: w.entry, Status: cq.WRFlushErr, Opcode: cq.OpRecv, QPNum: q.qpn}
		q.pushRecv(&wc, false)
		q.rq.head++
	}
}

// fatal completes w with an error status and moves the QP to ERR.
func (q *QP) fatal(w *sendWQE, st cq.Status) {
	if w != nil {
		w.state, w.status = wqeDone, st
	}
	q.enterError()
}

func (q *QP) pushSend(wc *cq.WC) {
	fired, err := q.sendCQ.Push(wc, false)
	q.nt.sendFired = q.nt.sendFired || fired
	if err != nil {
		q.nt.sendErr = err
		q.cqError(err)
	}
}

func (q *QP) pushRecv(wc *cq.WC, solicited bool) {
	fired, err := q.recvCQ.Push(wc, solicited)
	q.nt.recvFired = q.nt.recvFired || fired
	if err != nil {
		q.nt.recvErr = err
		q.cqError(err)
	}
}

func (q *QP) cqError(err error) {
	q.event(Event{Type: EventCQError, QPN: q.qpn, Err: err})
	if q.state != Err {
		q.state = Err // the completions that follow would be lost: stop here
		q.stopTimers()
		q.event(Event{Type: EventQPFatal, QPN: q.qpn, Err: err})
	}
}

// ackTimeout returns the local ACK timeout, 4.096 µs × 2^timeout (0: none).
func (q *QP) ackTimeout() time.Duration {
	if q.attr.Timeout == 0 {
		return 0
	}
	return time.Duration(4096<<q.attr.Timeout) * time.Nanosecond
}

// HandlePacket is called by the device's receive loop for each packet
// addressed to this QP. It reports whether the packet passed the header
// checks (transport, state, for RC and UC the peer's address) and reached
// the transport; a packet that did not is counted under the check.
func (q *QP) HandlePacket(pkt *rocev2.Packet, dg *backend.Incoming) bool {
	op := pkt.Opcode()
	if op&0xE0 != q.tr {
		q.dev.Counters.RcvdWrongQPType.Add(1)
		return false
	}
	q.mu.Lock()
	defer q.unlock()
	if q.typ == UD {
		// A datagram QP takes packets from anyone: the Q_Key is its
		// check (ud.go).
		if q.state != RTR && q.state != RTS && q.state != SQD {
			q.dev.Counters.RcvdQPStateDrop.Add(1)
			return false
		}
		q.respondUD(pkt, dg)
		return true
	}
	if dg.Src.Addr().Unmap().WithZone("") != q.raddr.Addr() {
		// A connected QP takes packets only from its peer's address, as
		// rxe's check_addr does: otherwise anyone who guesses a QP number
		// and a PSN could write into the stream. (The UDP source port
		// varies per flow and is not checked.)
		q.dev.Counters.RcvdAddrErr.Add(1)
		return false
	}
	switch {
	case op.Is(rocev2.OpRequest):
		if q.state != RTR && q.state != RTS && q.state != SQD {
			q.dev.Counters.RcvdQPStateDrop.Add(1)
			return false
		}
		if q.typ == UC {
			q.respondUC(pkt)
			return true
		}
		q.respond(pkt)
	case op.Is(rocev2.OpResponse):
		if q.state != RTS && q.state != SQD {
			q.dev.Counters.RcvdQPStateDrop.Add(1)
			return false
		}
		// The window may have moved, a gate opened or a retry begun: send
		// what can go now (into the outbox, after everything this QP built
		// before, so in PSN order).
		q.complete(pkt)
		q.runRequester()
	}
	return true
}

// RandomPSN returns a random 24-bit PSN, as applications choose initial PSNs.
func RandomPSN() rocev2.PSN { return rocev2.PSN(rand.Uint32() & rocev2.PSNMask) }
