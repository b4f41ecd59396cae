package qp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/device"
)

// Unsignaled successful WRs produce no completion but retire in order; with
// SigAll every WR completes.
func TestRCSignaling(t *testing.T) {
	for _, sigAll := range []bool{false, true} {
		a, b := newPair(t, pairConfig{sigAll: sigAll})
		var wrs []SendWR
		for i := 0; i < 6; i++ {
			f := SendFlags(0)
			if i == 5 {
				f = SendSignaled
			}
			wrs = append(wrs, SendWR{WRID: uint64(i), Opcode: WRRDMAWrite, Flags: f, SGL: []SGE{a.sge(0, 10)}, RemoteAddr: b.mr.VA(), RKey: b.mr.RKey()})
		}
		_, err := a.qp.PostSend(wrs)
		require.NoError(t, err)
		want := 1
		if sigAll {
			want = 6
		}
		wcs := waitWCs(t, a.cq, want, wait)
		assert.Equal(t, uint64(5), wcs[len(wcs)-1].WRID)
		for i, wc := range wcs {
			assert.Equal(t, cq.Success, wc.Status)
			if sigAll {
				assert.Equal(t, uint64(i), wc.WRID)
			}
		}
		barrier(t, a, b)
		requireNoWC(t, a.cq)
	}
}

// A FENCE waits for the READ before it: the SEND after it carries what the
// READ fetched (the READ lands before the SEND's data is gathered).
func TestRCFence(t *testing.T) {
	a, b := newPair(t, pairConfig{})
	copy(b.buf[100:], "fetched-by-read")
	_, err := b.qp.PostRecv([]RecvWR{{WRID: 1, SGL: []SGE{b.sge(1000, 64)}}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]SendWR{
		{WRID: 1, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{a.sge(0, 15)}, RemoteAddr: b.mr.VA() + 100, RKey: b.mr.RKey()},
		{WRID: 2, Opcode: WRSend, Flags: SendSignaled | SendFence, SGL: []SGE{a.sge(0, 15)}},
	})
	require.NoError(t, err)
	wcs := waitWCs(t, a.cq, 2, wait)
	assert.Equal(t, cq.OpRDMARead, wcs[0].Opcode)
	assert.Equal(t, cq.OpSend, wcs[1].Opcode)
	rw := waitWCs(t, b.cq, 1, wait)
	require.Equal(t, cq.Success, rw[0].Status)
	assert.Equal(t, "fetched-by-read", string(b.buf[1000:1015]))
}

// A solicited-only arm wakes on a SEND with the solicited flag, not before.
func TestRCSolicitedEvent(t *testing.T) {
	a, b := newPair(t, pairConfig{})
	_, err := b.qp.PostRecv([]RecvWR{{WRID: 1, SGL: []SGE{b.sge(0, 64)}}, {WRID: 2, SGL: []SGE{b.sge(64, 64)}}})
	require.NoError(t, err)
	require.False(t, b.cq.Arm(true))
	_, err = a.qp.PostSend([]SendWR{{WRID: 1, Opcode: WRSend, SGL: []SGE{a.sge(0, 8)}}})
	require.NoError(t, err)
	barrierNoRecv(t, a)
	require.Len(t, b.cq.Events(), 0, "an unsolicited receive fired a solicited arm")
	_, err = a.qp.PostSend([]SendWR{{WRID: 2, Opcode: WRSend, Flags: SendSolicited, SGL: []SGE{a.sge(0, 8)}}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, b.cq.Wait(ctx))
	assert.Len(t, waitWCs(t, b.cq, 2, wait), 2)
}

// barrierNoRecv waits until everything a sent so far is acknowledged, using
// a signaled zero-length WRITE (no receive needed at the peer).
func barrierNoRecv(t *testing.T, a *node) {
	t.Helper()
	_, err := a.qp.PostSend([]SendWR{{WRID: 0xbb, Opcode: WRRDMAWrite, Flags: SendSignaled}})
	require.NoError(t, err)
	require.Equal(t, cq.Success, waitWCs(t, a.cq, 1, wait)[0].Status)
}

func TestRCInvalidate(t *testing.T) {
	a, b := newPair(t, pairConfig{})
	extra, err := b.pd.RegisterMR(make([]byte, 64), device.AccessLocalWrite|device.AccessRemoteWrite)
	require.NoError(t, err)
	_, err = b.qp.PostRecv([]RecvWR{{WRID: 1, SGL: []SGE{b.sge(0, 64)}}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]SendWR{{WRID: 1, Opcode: WRSendWithInv, Flags: SendSignaled, Imm: extra.RKey(), SGL: []SGE{a.sge(0, 8)}}})
	require.NoError(t, err)
	require.Equal(t, cq.Success, waitWCs(t, a.cq, 1, wait)[0].Status)
	rw := waitWCs(t, b.cq, 1, wait)[0]
	require.Equal(t, cq.Success, rw.Status)
	assert.Equal(t, cq.WithInv, rw.Flags)
	assert.Equal(t, extra.RKey(), rw.Imm)
	assert.False(t, extra.Valid(), "SEND_WITH_INV invalidated the region")

	// LOCAL_INV on the requester's own region.
	own, err := a.pd.RegisterMR(make([]byte, 64), device.AccessLocalWrite)
	require.NoError(t, err)
	_, err = a.qp.PostSend([]SendWR{{WRID: 2, Opcode: WRLocalInv, Flags: SendSignaled, Imm: own.LKey()}})
	require.NoError(t, err)
	wc := waitWCs(t, a.cq, 1, wait)[0]
	assert.Equal(t, cq.Success, wc.Status)
	assert.Equal(t, cq.OpLocalInv, wc.Opcode)
	assert.False(t, own.Valid())
}

// Local errors are reported as completions, and the QP goes to ERR.
func TestRCLocalProtectionError(t *testing.T) {
	a, _ := newPair(t, pairConfig{})
	_, err := a.qp.PostSend([]SendWR{{WRID: 7, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{{Addr: a.mr.VA(), Length: 8, LKey: a.mr.RKey()}}}})
	require.NoError(t, err)
	wc := waitWCs(t, a.cq, 1, wait)[0]
	assert.Equal(t, cq.LocProtErr, wc.Status)
	assert.Equal(t, Err, a.qp.State())
}

// RTS→SQD stops at a message boundary and reports SQ_DRAINED; SQD→RTS resumes.
func TestRCSQD(t *testing.T) {
	events := make(chan Event, 8)
	a, b := newPair(t, pairConfig{noConnect: true})
	a.qp.onEvt = func(e Event) { events <- e }
	connect(t, a, b, pairConfig{})
	connect(t, b, a, pairConfig{})
	require.NoError(t, a.qp.Modify(&Attr{State: SQD}, MaskState))
	select {
	case e := <-events:
		assert.Equal(t, EventSQDrained, e.Type)
	case <-time.After(wait):
		t.Fatal("no SQ_DRAINED")
	}
	_, err := a.qp.PostSend([]SendWR{{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)}, RemoteAddr: b.mr.VA(), RKey: b.mr.RKey()}})
	require.NoError(t, err)
	requireNoWC(t, a.cq) // queued, not sent, while drained
	require.NoError(t, a.qp.Modify(&Attr{State: RTS}, MaskState))
	assert.Equal(t, cq.Success, waitWCs(t, a.cq, 1, wait)[0].Status)
}
