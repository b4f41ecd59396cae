package qp

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// An RC QP and a UD QP draw from one SRQ: each message takes the SRQ's
// next WQE, in order, and completes on its own QP's CQ.
func TestSRQSharedByRCAndUD(t *testing.T) {
	rcA, rcB := newDgPair(t, dgConfig{typ: RC, srq: &SRQAttr{MaxWR: 64}})
	srq := rcB.srq
	// A UD QP on the same device and SRQ, and a UD sender next to rcA.
	ud, err := Create(rcB.pd, InitAttr{Type: UD, SendCQ: rcB.cq, RecvCQ: rcB.cq, SRQ: srq, Cap: Cap{MaxSendWR: 4}})
	require.NoError(t, err)
	require.NoError(t, ud.Modify(&Attr{State: Init, Port: 1, QKey: testQKey}, MaskState|MaskPKeyIndex|MaskPort|MaskQKey))
	require.NoError(t, ud.Modify(&Attr{State: RTR}, MaskState))
	sender, err := Create(rcA.pd, InitAttr{Type: UD, SendCQ: rcA.cq, RecvCQ: rcA.cq, Cap: Cap{MaxSendWR: 4, MaxRecvWR: 1}})
	require.NoError(t, err)
	require.NoError(t, sender.Modify(&Attr{State: Init, Port: 1, QKey: testQKey}, MaskState|MaskPKeyIndex|MaskPort|MaskQKey))
	require.NoError(t, sender.Modify(&Attr{State: RTR}, MaskState))
	require.NoError(t, sender.Modify(&Attr{State: RTS}, MaskState|MaskSQPSN))
	gid, err := rcB.dev.GID(1)
	require.NoError(t, err)
	toB, err := CreateAH(rcA.pd, AH{DGID: gid, SGIDIndex: 1, DestPort: rcB.dev.LocalAddr().Port()})
	require.NoError(t, err)
	udSend := func(wr SendWR) {
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = toB, ud.QPN(), testQKey
		_, err := sender.PostSend([]SendWR{wr})
		require.NoError(t, err)
	}

	for i := range 8 {
		rcB.postRecv(t, uint64(100+i), i*2048, 2048)
	}
	for i := range rcA.buf {
		rcA.buf[i] = byte(i)
	}
	// RC SEND (2 packets), UD SEND, RC SEND, UD SEND with immediate:
	// WQEs 100..103 in that order.
	_, err = rcA.qp.PostSend([]SendWR{{WRID: 1, Opcode: WRSend, SGL: []SGE{rcA.sge(0, 1500)}}})
	require.NoError(t, err)
	got := waitWCs(t, rcB.cq, 1, waitLimit)
	copy(rcA.buf[4096:], "datagram")
	udSend(SendWR{Opcode: WRSend, SGL: []SGE{rcA.sge(4096, 8)}})
	got = append(got, waitWCs(t, rcB.cq, 1, waitLimit)...)
	_, err = rcA.qp.PostSend([]SendWR{{WRID: 2, Opcode: WRSend, SGL: []SGE{rcA.sge(0, 10)}}})
	require.NoError(t, err)
	got = append(got, waitWCs(t, rcB.cq, 1, waitLimit)...)
	udSend(SendWR{Opcode: WRSendWithImm, Imm: 3})
	got = append(got, waitWCs(t, rcB.cq, 1, waitLimit)...)

	want := []cq.WC{
		{WRID: 100, Opcode: cq.OpRecv, ByteLen: 1500, QPNum: rcB.qp.QPN(), SrcQP: rcA.qp.QPN()},
		{WRID: 101, Opcode: cq.OpRecv, Flags: cq.WithGRH, ByteLen: rocev2.GRHLen + 8, QPNum: ud.QPN(), SrcQP: sender.QPN()},
		{WRID: 102, Opcode: cq.OpRecv, ByteLen: 10, QPNum: rcB.qp.QPN(), SrcQP: rcA.qp.QPN()},
		{WRID: 103, Opcode: cq.OpRecv, Flags: cq.WithGRH | cq.WithImm, Imm: 3, ByteLen: rocev2.GRHLen, QPNum: ud.QPN(), SrcQP: sender.QPN()},
	}
	assert.Equal(t, want, got)
	assert.Equal(t, rcA.buf[:1500], rcB.buf[:1500])
	assert.Equal(t, "datagram", string(rcB.buf[2048+rocev2.GRHLen:2048+rocev2.GRHLen+8]))

	// PostRecv on an SRQ QP is refused; so is destroying the SRQ in use.
	_, err = ud.PostRecv([]RecvWR{{WRID: 1}})
	assert.ErrorIs(t, err, ErrBadWR)
	assert.ErrorIs(t, srq.Destroy(), ErrSRQInUse)
	require.NoError(t, ud.Destroy())
	require.NoError(t, rcB.qp.Destroy())
	require.NoError(t, srq.Destroy())
	_, err = srq.PostRecv([]RecvWR{{WRID: 1}})
	assert.ErrorIs(t, err, ErrDestroyed)
}

// The limit event fires once when the WQEs left drop below the armed limit,
// after the lock is released (its handler re-arms the SRQ), and not again
// until armed again.
func TestSRQLimitEvent(t *testing.T) {
	var mu sync.Mutex
	var events []SRQEvent
	var rearm bool
	var srq *SRQ
	// The event comes after the completion of the receive that fired it
	// (both are raised under the QP's lock, the event delivered after it is
	// released): fired says when the handler is done.
	fired := make(chan struct{}, 16)
	onEvent := func(e SRQEvent) {
		mu.Lock()
		events = append(events, e)
		again := rearm
		mu.Unlock()
		if again {
			// From inside the handler: no lock of the SRQ or QP is held.
			assert.NoError(t, e.SRQ.Modify(&SRQAttr{Limit: 2}, MaskSRQLimit))
		}
		fired <- struct{}{}
	}
	waitFired := func() {
		t.Helper()
		select {
		case <-fired:
		case <-time.After(waitLimit):
			require.FailNow(t, "no SRQ limit event")
		}
	}
	a, b := newDgPair(t, dgConfig{typ: UC, mtu: rocev2.MTU256})
	var err error
	srq, err = CreateSRQ(b.pd, SRQInitAttr{Attr: SRQAttr{MaxWR: 16, Limit: 4}, OnEvent: onEvent})
	require.NoError(t, err)
	q, err := Create(b.pd, InitAttr{Type: UC, SendCQ: b.cq, RecvCQ: b.cq, SRQ: srq, Cap: Cap{MaxSendWR: 4}})
	require.NoError(t, err)
	b.qp, b.srq = q, srq
	b.connect(t, a)
	require.NoError(t, a.qp.Modify(&Attr{State: Reset}, MaskState))
	a.connect(t, b) // towards the new QP

	for i := range 8 {
		b.postRecv(t, uint64(i), i*64, 64)
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(events)
	}
	send := func(n int) {
		for range n {
			_, err := a.qp.PostSend([]SendWR{{Opcode: WRSend, SGL: []SGE{a.sge(0, 8)}}})
			require.NoError(t, err)
		}
		waitWCs(t, b.cq, n, waitLimit)
	}
	send(4) // 8 → 4 left: not below 4
	assert.Zero(t, count())
	assert.Equal(t, 4, srq.Query().Limit)
	send(1) // 3 left: fires
	waitFired()
	assert.Equal(t, 1, count())
	assert.Equal(t, EventSRQLimitReached, events[0].Type)
	assert.Same(t, srq, events[0].SRQ)
	assert.Zero(t, srq.Query().Limit, "disarmed once fired")
	send(1) // 2 left: disarmed, nothing
	assert.Equal(t, 1, count())

	mu.Lock()
	rearm = true
	mu.Unlock()
	require.NoError(t, srq.Modify(&SRQAttr{Limit: 2}, MaskSRQLimit))
	send(1) // 1 left, below 2: fires, and the handler arms it again
	waitFired()
	assert.Equal(t, 2, count(), "one event per arming: none for the send in between")
	assert.Equal(t, 2, srq.Query().Limit)

	// Arming beyond the queue's size, resizing, and other masks fail.
	assert.Error(t, srq.Modify(&SRQAttr{Limit: 17}, MaskSRQLimit))
	assert.Error(t, srq.Modify(&SRQAttr{MaxWR: 32}, MaskSRQMaxWR))
	assert.Error(t, srq.Modify(&SRQAttr{}, 1<<5))
}

// Creating and posting to an SRQ checks its limits.
func TestSRQLimits(t *testing.T) {
	a, _ := newDgPair(t, dgConfig{typ: UD})
	for _, attr := range []SRQAttr{{MaxWR: 0}, {MaxWR: device.MaxSRQWR + 1}, {MaxWR: 4, MaxSGE: device.MaxSRQSGE + 1}, {MaxWR: 4, Limit: 5}, {MaxWR: 4, Limit: -1}} {
		_, err := CreateSRQ(a.pd, SRQInitAttr{Attr: attr})
		assert.Error(t, err, "%+v", attr)
	}
	srq, err := CreateSRQ(a.pd, SRQInitAttr{Attr: SRQAttr{MaxWR: 2, MaxSGE: 2}})
	require.NoError(t, err)
	assert.Equal(t, SRQAttr{MaxWR: 2, MaxSGE: 2}, srq.Query())
	_, err = srq.PostRecv([]RecvWR{{SGL: []SGE{a.sge(0, 1), a.sge(1, 1), a.sge(2, 1)}}})
	assert.ErrorIs(t, err, ErrBadWR)
	n, err := srq.PostRecv([]RecvWR{{WRID: 1}, {WRID: 2}, {WRID: 3}})
	assert.Equal(t, 2, n)
	assert.ErrorIs(t, err, ErrQueueFull)
	// An SRQ of another PD cannot serve a QP.
	_, err = Create(a.dev.AllocPD(), InitAttr{Type: UD, SendCQ: a.cq, RecvCQ: a.cq, SRQ: srq, Cap: Cap{MaxSendWR: 1}})
	assert.Error(t, err)
}

// A QP on an SRQ that goes to ERR flushes only the WQE it took (a
// multi-packet SEND in progress), raises LAST_WQE_REACHED, and leaves the
// SRQ's other WQEs to the other QPs; a UD message too long for the WQE it
// took completes that WQE in error (it is gone from the SRQ).
func TestSRQErrorAndLength(t *testing.T) {
	var mu sync.Mutex
	var events []Event
	a, b := newDgPair(t, dgConfig{typ: UC, mtu: rocev2.MTU256})
	taken := make(chan struct{}, 1)
	// The limit event says when the FIRST below has taken its WQE.
	srq, err := CreateSRQ(b.pd, SRQInitAttr{Attr: SRQAttr{MaxWR: 8, Limit: 3}, OnEvent: func(SRQEvent) { taken <- struct{}{} }})
	require.NoError(t, err)
	b.srq = srq
	q, err := Create(b.pd, InitAttr{Type: UC, SendCQ: b.cq, RecvCQ: b.cq, SRQ: srq, Cap: Cap{MaxSendWR: 4},
		OnAsyncEvent: func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }})
	require.NoError(t, err)
	require.NoError(t, b.qp.Destroy())
	b.qp = q
	b.connect(t, a)
	require.NoError(t, a.qp.Modify(&Attr{State: Reset}, MaskState))
	a.connect(t, b)
	x := newAttacker(t, &b.node, "127.0.0.1:9999")
	for i := range 3 {
		b.postRecv(t, uint64(i), i*1024, 1024)
	}
	// The FIRST of a SEND takes WQE 0; the QP then goes to ERR.
	x.send(t, &b.node, ucPacket(b, rocev2.UCSendFirst, b.psn), bytesOf(256, 1))
	select {
	case <-taken:
	case <-time.After(waitLimit): // a hang guard
		t.Fatal("the FIRST packet never took its WQE")
	}
	require.NoError(t, q.Modify(&Attr{State: Err}, MaskState))
	wc := waitWCs(t, b.cq, 1, waitLimit)[0]
	assert.Equal(t, cq.WC{WRID: 0, Status: cq.WRFlushErr, Opcode: cq.OpRecv, QPNum: q.QPN()}, wc)
	requireNoWC(t, b.cq)
	mu.Lock()
	assert.Contains(t, events, Event{Type: EventLastWQEReached, QPN: q.QPN()})
	mu.Unlock()

	// A UD QP on the same SRQ takes the next WQE (1); too long for it, it
	// completes in error; WQE 2 then takes the next message.
	ud, err := Create(b.pd, InitAttr{Type: UD, SendCQ: b.cq, RecvCQ: b.cq, SRQ: srq, Cap: Cap{MaxSendWR: 1}})
	require.NoError(t, err)
	require.NoError(t, ud.Modify(&Attr{State: Init, Port: 1, QKey: testQKey}, MaskState|MaskPKeyIndex|MaskPort|MaskQKey))
	require.NoError(t, ud.Modify(&Attr{State: RTR}, MaskState))
	x.send(t, &b.node, rocev2.Fields{Opcode: rocev2.UDSendOnly, DestQP: ud.QPN(), QKey: testQKey}, make([]byte, 1024-rocev2.GRHLen+1))
	wc = waitWCs(t, b.cq, 1, waitLimit)[0]
	assert.Equal(t, cq.WC{WRID: 1, Status: cq.RemInvReqErr, Opcode: cq.OpRecv, QPNum: ud.QPN()}, wc)
	x.send(t, &b.node, rocev2.Fields{Opcode: rocev2.UDSendOnly, DestQP: ud.QPN(), QKey: testQKey}, make([]byte, 8))
	wc = waitWCs(t, b.cq, 1, waitLimit)[0]
	assert.Equal(t, uint64(2), wc.WRID)
	assert.Equal(t, cq.Success, wc.Status)
}
