package qp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2/device"
)

// Every remote access violation gets the right NAK and error completion, the
// responder's memory is untouched, and both QPs end in ERR.
func TestRCRemoteAccessViolations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(a, b *node) SendWR
		status cq.Status
		nak    string
	}{
		{"write with a bad rkey", func(a, b *node) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: b.mr.VA(), RKey: b.mr.RKey() ^ 0x5a5a}
		}, cq.RemAccessErr, "remote-access"},
		{"write with the lkey instead of the rkey", func(a, b *node) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: b.mr.VA(), RKey: b.mr.LKey()}
		}, cq.RemAccessErr, "remote-access"},
		{"write past the end", func(a, b *node) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: b.mr.VA() + uint64(len(b.buf)) - 32, RKey: b.mr.RKey()}
		}, cq.RemAccessErr, "remote-access"},
		{"write before the start", func(a, b *node) SendWR {
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: b.mr.VA() - 8, RKey: b.mr.RKey()}
		}, cq.RemAccessErr, "remote-access"},
		{"write to a region of another PD", func(a, b *node) SendWR {
			other, err := b.dev.AllocPD().RegisterMR(make([]byte, 4096), device.AccessLocalWrite|device.AccessRemoteWrite)
			require.NoError(t, err)
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: other.VA(), RKey: other.RKey()}
		}, cq.RemAccessErr, "remote-access"},
		{"write to a read-only region", func(a, b *node) SendWR {
			ro, err := b.pd.RegisterMR(make([]byte, 4096), device.AccessRemoteRead)
			require.NoError(t, err)
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: ro.VA(), RKey: ro.RKey()}
		}, cq.RemAccessErr, "remote-access"},
		{"read from a write-only region", func(a, b *node) SendWR {
			wo, err := b.pd.RegisterMR(make([]byte, 4096), device.AccessLocalWrite|device.AccessRemoteWrite)
			require.NoError(t, err)
			return SendWR{Opcode: WRRDMARead, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: wo.VA(), RKey: wo.RKey()}
		}, cq.RemAccessErr, "remote-access"},
		{"write to a deregistered region", func(a, b *node) SendWR {
			rkey, va := b.mr.RKey(), b.mr.VA()
			require.NoError(t, b.mr.Deregister())
			return SendWR{Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 64)}, RemoteAddr: va, RKey: rkey}
		}, cq.RemAccessErr, "remote-access"},
		{"atomic without atomic access", func(a, b *node) SendWR {
			rw, err := b.pd.RegisterMR(make([]byte, 4096), device.AccessLocalWrite|device.AccessRemoteWrite|device.AccessRemoteRead)
			require.NoError(t, err)
			return SendWR{Opcode: WRAtomicFetchAdd, SGL: []SGE{a.sge(0, 8)}, RemoteAddr: rw.VA(), RKey: rw.RKey(), CompareAdd: 1}
		}, cq.RemAccessErr, "remote-access"},
		{"misaligned atomic", func(a, b *node) SendWR {
			return SendWR{Opcode: WRAtomicFetchAdd, SGL: []SGE{a.sge(0, 8)}, RemoteAddr: b.mr.VA() + 4, RKey: b.mr.RKey(), CompareAdd: 1}
		}, cq.RemInvReqErr, "invalid-request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newPair(t, pairConfig{})
			fill(a.buf, 1)
			before := append([]byte(nil), b.buf...)
			wr := tc.setup(a, b)
			wr.WRID, wr.Flags = 9, SendSignaled
			_, err := a.qp.PostSend([]SendWR{wr})
			require.NoError(t, err)
			wcs := waitWCs(t, a.cq, 1, wait)
			assert.Equal(t, tc.status, wcs[0].Status)
			assert.Equal(t, uint64(9), wcs[0].WRID)
			assert.Equal(t, before, b.buf, "responder memory changed")
			assert.Equal(t, Err, a.qp.State())
			assert.Equal(t, Err, b.qp.State())
			assert.Equal(t, uint64(1), b.dev.Counters.SentNAKs.Load(), tc.nak)
		})
	}
}

// A QP without the remote access flag answers with NAK invalid request.
func TestRCQPAccessFlags(t *testing.T) {
	a, b := newPair(t, pairConfig{access: device.AccessLocalWrite})
	// The MR allows everything, but the QP does not.
	mr, err := b.pd.RegisterMR(make([]byte, 64), device.AccessLocalWrite|device.AccessRemoteWrite)
	require.NoError(t, err)
	_, err = a.qp.PostSend([]SendWR{{WRID: 1, Opcode: WRRDMAWrite, SGL: []SGE{a.sge(0, 8)}, RemoteAddr: mr.VA(), RKey: mr.RKey()}})
	require.NoError(t, err)
	wcs := waitWCs(t, a.cq, 1, wait)
	assert.Equal(t, cq.RemInvReqErr, wcs[0].Status)
}

func TestRCReceiveTooSmall(t *testing.T) {
	a, b := newPair(t, pairConfig{})
	_, err := b.qp.PostRecv([]RecvWR{{WRID: 5, SGL: []SGE{b.sge(0, 10)}}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]SendWR{{WRID: 6, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 11)}}})
	require.NoError(t, err)
	wcs := waitWCs(t, a.cq, 1, wait)
	assert.Equal(t, cq.RemInvReqErr, wcs[0].Status)
	rw := waitWCs(t, b.cq, 1, wait)
	assert.Equal(t, cq.LocLenErr, rw[0].Status)
	assert.Equal(t, uint64(5), rw[0].WRID)
}

func TestRCRNRRetryExhausted(t *testing.T) {
	a, b := newPair(t, pairConfig{rnrRetry: 2, rnrTimer: 1})
	_, err := a.qp.PostSend([]SendWR{{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)}}})
	require.NoError(t, err)
	wcs := waitWCs(t, a.cq, 1, wait)
	assert.Equal(t, cq.RNRRetryExcErr, wcs[0].Status)
	assert.Equal(t, Err, a.qp.State())
	assert.Equal(t, RTS, b.qp.State(), "an RNR NAK is not an error at the responder")
	assert.Equal(t, uint64(3), b.dev.Counters.SendRNRErr.Load(), "first try and two retries")
	assert.Equal(t, uint64(1), a.dev.Counters.RetryRNRExceededErr.Load())
}

func TestRCRNRRecovers(t *testing.T) {
	a, b := newPair(t, pairConfig{rnrRetry: 7, rnrTimer: 1})
	_, err := a.qp.PostSend([]SendWR{{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 3000)}}})
	require.NoError(t, err)
	// Wait until the responder has said RNR at least once, then post.
	require.Eventually(t, func() bool { return b.dev.Counters.SendRNRErr.Load() > 0 }, wait, time.Millisecond)
	_, err = b.qp.PostRecv([]RecvWR{{WRID: 2, SGL: []SGE{b.sge(0, 4096)}}})
	require.NoError(t, err)
	wcs := waitWCs(t, a.cq, 1, wait)
	assert.Equal(t, cq.Success, wcs[0].Status)
	rw := waitWCs(t, b.cq, 1, wait)
	assert.Equal(t, cq.Success, rw[0].Status)
	assert.Equal(t, uint32(3000), rw[0].ByteLen)
}

func TestRCRetryExhaustedWhenPeerIsGone(t *testing.T) {
	a, b := newPair(t, pairConfig{retry: 2, timeout: 8}) // 1 ms
	require.NoError(t, b.qp.Destroy())
	_, err := a.qp.PostSend([]SendWR{
		{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)}, RemoteAddr: 0, RKey: 1},
		{WRID: 2, Opcode: WRSend, SGL: []SGE{a.sge(0, 8)}},
	})
	require.NoError(t, err)
	wcs := waitWCs(t, a.cq, 2, wait)
	assert.Equal(t, cq.RetryExcErr, wcs[0].Status)
	assert.Equal(t, uint64(1), wcs[0].WRID)
	assert.Equal(t, cq.WRFlushErr, wcs[1].Status, "the unsignaled WR behind it is flushed")
	assert.Equal(t, uint64(2), wcs[1].WRID)
	assert.Equal(t, Err, a.qp.State())
	assert.Equal(t, uint64(1), a.dev.Counters.RetryExceededErr.Load())
	assert.Equal(t, uint64(2), a.dev.Counters.CompleterRetryErr.Load())
}

// On ERR every outstanding WR completes exactly once with WR_FLUSH_ERR,
// signaled or not; later posts are flushed too; RESET discards silently.
func TestRCFlushOnErrorAndReset(t *testing.T) {
	a, b := newPair(t, pairConfig{rnrRetry: 7, rnrTimer: 31}) // RNR-stalled: nothing completes
	var wrs []SendWR
	for i := 0; i < 10; i++ {
		f := SendFlags(0)
		if i%2 == 0 {
			f = SendSignaled
		}
		wrs = append(wrs, SendWR{WRID: uint64(i), Opcode: WRSend, Flags: f, SGL: []SGE{a.sge(0, 100)}})
	}
	_, err := a.qp.PostSend(wrs)
	require.NoError(t, err)
	_, err = a.qp.PostRecv([]RecvWR{{WRID: 100}, {WRID: 101}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.dev.Counters.SendRNRErr.Load() > 0 }, wait, time.Millisecond)

	require.NoError(t, a.qp.Modify(&Attr{State: Err}, MaskState))
	wcs := waitWCs(t, a.cq, 12, wait)
	seen := map[uint64]int{}
	for _, wc := range wcs {
		assert.Equal(t, cq.WRFlushErr, wc.Status)
		seen[wc.WRID]++
	}
	for i := 0; i < 10; i++ {
		assert.Equal(t, 1, seen[uint64(i)], "wr %d", i)
	}
	assert.Equal(t, 1, seen[100])
	assert.Equal(t, 1, seen[101])
	requireNoWC(t, a.cq)

	_, err = a.qp.PostSend([]SendWR{{WRID: 200, Opcode: WRSend, SGL: []SGE{a.sge(0, 1)}}})
	require.NoError(t, err)
	wcs = waitWCs(t, a.cq, 1, wait)
	assert.Equal(t, cq.WRFlushErr, wcs[0].Status)
	assert.Equal(t, uint64(200), wcs[0].WRID)

	_, err = a.qp.PostRecv([]RecvWR{{WRID: 300}})
	require.NoError(t, err)
	waitWCs(t, a.cq, 1, wait)
	require.NoError(t, a.qp.Modify(&Attr{State: Reset}, MaskState))
	assert.Equal(t, Reset, a.qp.State())
	requireNoWC(t, a.cq)
}

func TestModifyTransitions(t *testing.T) {
	a, _ := newPair(t, pairConfig{noConnect: true})
	q := a.qp
	err := q.Modify(&Attr{State: RTR}, MaskState)
	require.ErrorContains(t, err, "RESET→RTR: not a legal transition")
	err = q.Modify(&Attr{State: Init, Port: 1}, MaskState|MaskPort|MaskPKeyIndex)
	require.ErrorContains(t, err, "missing ACCESS_FLAGS")
	err = q.Modify(&Attr{State: Init, Port: 1}, MaskState|MaskPort|MaskPKeyIndex|MaskAccessFlags|MaskSQPSN)
	require.ErrorContains(t, err, "SQ_PSN are not allowed")
	err = q.Modify(&Attr{State: Init, Port: 2}, MaskState|MaskPort|MaskPKeyIndex|MaskAccessFlags)
	require.ErrorContains(t, err, "port 2")
	require.NoError(t, q.Modify(&Attr{State: Init, Port: 1}, MaskState|MaskPort|MaskPKeyIndex|MaskAccessFlags))
	err = q.Modify(&Attr{State: RTR, PathMTU: 3}, MaskState|MaskPathMTU)
	require.ErrorContains(t, err, "INIT→RTR: missing AV|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN")
	err = q.Modify(&Attr{State: RTR, PathMTU: 3}, MaskState|MaskPathMTU|MaskAV|MaskDestQPN|MaskRQPSN|MaskMaxDestRdAtomic|MaskMinRNRTimer)
	require.ErrorContains(t, err, "GRH")
	_, err = q.PostSend([]SendWR{{Opcode: WRSend}})
	require.ErrorIs(t, err, ErrState)
	require.NoError(t, q.Modify(&Attr{State: Err}, MaskState))
	require.NoError(t, q.Modify(&Attr{State: Reset}, MaskState))
	err = q.Modify(&Attr{State: Reset, Timeout: 3}, MaskState|MaskTimeout)
	require.ErrorContains(t, err, "not allowed")
}
