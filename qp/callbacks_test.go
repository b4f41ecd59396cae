package qp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
)

// Callbacks run after the QP's lock is released, so each may call back
// into the very QP that raised it. A callback run under the lock would
// deadlock here, and the hang guard would fail the test.

// withCallbacks replaces n's CQ and QP with ones whose CQ event and async
// event call onEvent and onAsync (set later by the test, through the
// returned pointers).
func withCallbacks(t *testing.T, n *node, depth int) (onEvent *func(), onAsync *func(Event)) {
	t.Helper()
	onEvent, onAsync = new(func()), new(func(Event))
	c, err := cq.New(depth, cq.Config{OnEvent: func() {
		if f := *onEvent; f != nil {
			f()
		}
	}})
	require.NoError(t, err)
	q, err := Create(n.pd, InitAttr{Type: RC, SendCQ: c, RecvCQ: c, Cap: Cap{MaxSendWR: 16, MaxRecvWR: 16},
		OnAsyncEvent: func(e Event) {
			if f := *onAsync; f != nil {
				f(e)
			}
		}})
	require.NoError(t, err)
	n.cq, n.qp, n.poll = c, q, n.dev.NewPoller(c)
	return onEvent, onAsync
}

// callbackPair is a connected pair whose a side has callbacks (withCallbacks).
func callbackPair(t *testing.T, depth int) (a, b *node, onEvent *func(), onAsync *func(Event)) {
	a, b = newPair(t, pairConfig{noConnect: true})
	onEvent, onAsync = withCallbacks(t, a, depth)
	connect(t, a, b, pairConfig{})
	connect(t, b, a, pairConfig{})
	return a, b, onEvent, onAsync
}

func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard only
	t.Cleanup(cancel)
	return ctx
}

func await(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("hang: %s", what)
		case <-time.After(100 * time.Microsecond):
		}
	}
}

func TestCallbacksMayCallIntoTheirQP(t *testing.T) {
	t.Run("CQ event posts on the same QP", func(t *testing.T) {
		a, b, onEvent, _ := callbackPair(t, 64)
		// a echoes from its CQ's event callback: poll, repost, reply, re-arm.
		var echoed atomic.Int32
		wcs := make([]cq.WC, 8)
		*onEvent = func() {
			for {
				n := a.cq.Poll(wcs)
				for _, wc := range wcs[:n] {
					if wc.Opcode != cq.OpRecv {
						continue
					}
					_, err := a.qp.PostRecv([]RecvWR{{WRID: 1, SGL: []SGE{a.sge(0, 64)}}})
					require.NoError(t, err)
					_, err = a.qp.PostSend([]SendWR{{WRID: 2, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)}}})
					require.NoError(t, err)
					require.Equal(t, RTS, a.qp.State())
					echoed.Add(1)
				}
				if n == 0 && !a.cq.Arm(false) {
					return
				}
			}
		}
		_, err := a.qp.PostRecv([]RecvWR{{WRID: 1, SGL: []SGE{a.sge(0, 64)}}})
		require.NoError(t, err)
		require.False(t, a.cq.Arm(false))
		const msgs = 20
		for i := range msgs {
			_, err := b.qp.PostRecv([]RecvWR{{WRID: 3, SGL: []SGE{b.sge(0, 64)}}})
			require.NoError(t, err)
			_, err = b.qp.PostSend([]SendWR{{WRID: 4, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{b.sge(0, 8)}}})
			require.NoError(t, err)
			wcs := waitWCs(t, b.cq, 2, 30*time.Second)
			for _, wc := range wcs {
				require.Equal(t, cq.Success, wc.Status, "message %d", i)
			}
		}
		require.EqualValues(t, msgs, echoed.Load())
	})

	t.Run("QP fatal event resets the same QP", func(t *testing.T) {
		a, b, _, onAsync := callbackPair(t, 64)
		var reset atomic.Bool
		*onAsync = func(e Event) {
			if e.Type == EventQPFatal {
				require.Equal(t, Err, a.qp.State())
				require.NoError(t, a.qp.Modify(&Attr{State: Reset}, MaskState))
				reset.Store(true)
			}
		}
		// A WRITE with a wrong rkey: the peer NAKs it, the QP goes to ERR.
		_, err := a.qp.PostSend([]SendWR{{Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)},
			RemoteAddr: b.mr.VA(), RKey: b.mr.RKey() ^ 0xFFFF}})
		require.NoError(t, err)
		await(t, guard(t), "the QP fatal event", reset.Load)
		require.Equal(t, Reset, a.qp.State())
	})

	t.Run("SQ drained event moves the same QP back to RTS and posts", func(t *testing.T) {
		a, b, _, onAsync := callbackPair(t, 64)
		var resumed atomic.Bool
		*onAsync = func(e Event) {
			if e.Type == EventSQDrained {
				require.NoError(t, a.qp.Modify(&Attr{State: RTS}, MaskState))
				_, err := a.qp.PostSend([]SendWR{{WRID: 9, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)},
					RemoteAddr: b.mr.VA(), RKey: b.mr.RKey()}})
				require.NoError(t, err)
				resumed.Store(true)
			}
		}
		require.NoError(t, a.qp.Modify(&Attr{State: SQD}, MaskState))
		await(t, guard(t), "the SQ drained event", resumed.Load)
		wcs := waitWCs(t, a.cq, 1, 30*time.Second)
		require.Equal(t, cq.Success, wcs[0].Status)
		require.EqualValues(t, 9, wcs[0].WRID)
	})

	t.Run("CQ overflow event destroys the same QP", func(t *testing.T) {
		a, b, _, onAsync := callbackPair(t, 1)
		var destroyed atomic.Bool
		*onAsync = func(e Event) {
			if e.Type == EventCQError {
				_ = a.qp.State()
				require.NoError(t, a.qp.Destroy())
				destroyed.Store(true)
			}
		}
		for range 2 { // two completions on a CQ of depth 1
			_, err := a.qp.PostSend([]SendWR{{Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{a.sge(0, 8)},
				RemoteAddr: b.mr.VA(), RKey: b.mr.RKey()}})
			require.NoError(t, err)
		}
		await(t, guard(t), "the CQ error event", destroyed.Load)
	})
}
