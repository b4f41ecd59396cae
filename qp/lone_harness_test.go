package qp

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// loneRC is an RC QP in RTS whose peer says nothing: the test plays the
// peer's responder and hands the QP the responses it chooses. No local
// ACK timeout is set, so nothing happens between responses.
type loneRC struct {
	dev  *device.Device
	net  *memlink.Network
	q    *QP
	cq   *cq.CQ
	buf  []byte
	mr   *device.MR
	peer netip.AddrPort // the peer's address (nothing answers there)
	s    rocev2.PSN     // the QP's first PSN
	wcs  []cq.WC
}

// The WQEs load posts and their PSNs (from s): a two-packet SEND, a
// WRITE, a two-packet READ, a FetchAdd and a SEND; loneSent PSNs in all.
const (
	loneSend0   = 0 // and 1
	loneWrite   = 2
	loneRead    = 3 // and 4
	loneAtomic  = 5
	loneSend1   = 6
	loneSent    = 7
	loneReadDst = 16384 // where the READ and the FetchAdd place their data
	loneAtomDst = 24576
)

func newLoneRC(tb testing.TB, s rocev2.PSN) *loneRC {
	tb.Helper()
	l := &loneRC{net: memlink.NewNetwork(), peer: netip.MustParseAddrPort("127.0.0.66:4791"), s: s, wcs: make([]cq.WC, 16)}
	be, err := l.net.Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
	require.NoError(tb, err)
	l.dev, err = device.New(device.Config{Backend: be})
	require.NoError(tb, err)
	tb.Cleanup(func() { l.dev.Close() })
	silent, err := l.net.Attach(l.peer)
	require.NoError(tb, err)
	tb.Cleanup(func() { silent.Close() })
	go func() { // takes what the QP sends, answers nothing
		batch := make([]backend.Incoming, 64)
		for {
			if _, err := silent.Receive(batch); err != nil {
				return
			}
		}
	}()
	pd := l.dev.AllocPD()
	l.buf = make([]byte, 32768)
	for i := range l.buf {
		l.buf[i] = byte(i * 7)
	}
	l.mr, err = pd.RegisterMR(l.buf, device.AccessLocalWrite)
	require.NoError(tb, err)
	l.cq, err = cq.New(64, cq.Config{})
	require.NoError(tb, err)
	l.q, err = Create(pd, InitAttr{Type: RC, SendCQ: l.cq, RecvCQ: l.cq, Cap: Cap{MaxSendWR: 16, MaxRecvWR: 16}})
	require.NoError(tb, err)
	l.reconnect(tb)
	return l
}

// reconnect takes the QP through RESET to RTS again, empties the CQ and
// posts the WQEs afresh: every one of them is then sent and unanswered.
func (l *loneRC) reconnect(tb testing.TB) {
	tb.Helper()
	steps := []struct {
		a Attr
		m AttrMask
	}{
		{Attr{State: Reset}, MaskState},
		{Attr{State: Init, Port: 1}, MaskState | MaskPKeyIndex | MaskPort | MaskAccessFlags},
		{Attr{State: RTR, PathMTU: rocev2.MTU1024, DestQPN: 0x42, RQPSN: 0x100, MaxDestRdAtomic: 4, MinRNRTimer: 1,
			AH: AH{DGID: device.GIDFromAddr(l.peer.Addr()), SGIDIndex: 1}}, MaskState | MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN | MaskMaxDestRdAtomic | MaskMinRNRTimer},
		{Attr{State: RTS, SQPSN: l.s, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			MaskState | MaskSQPSN | MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic},
	}
	for _, st := range steps {
		require.NoError(tb, l.q.Modify(&st.a, st.m))
	}
	for l.cq.Poll(l.wcs) > 0 {
	}
	sge := func(off, n int) []SGE {
		return []SGE{{Addr: l.mr.VA() + uint64(off), Length: uint32(n), LKey: l.mr.LKey()}}
	}
	_, err := l.q.PostSend([]SendWR{
		{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: sge(0, 2048)},
		{WRID: 2, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: sge(4096, 1024), RemoteAddr: 0x1000, RKey: 0x1234},
		{WRID: 3, Opcode: WRRDMARead, Flags: SendSignaled, SGL: sge(loneReadDst, 2048), RemoteAddr: 0x2000, RKey: 0x1234},
		{WRID: 4, Opcode: WRAtomicFetchAdd, Flags: SendSignaled, SGL: sge(loneAtomDst, 8), RemoteAddr: 0x3000, RKey: 0x1234, CompareAdd: 1},
		{WRID: 5, Opcode: WRSend, Flags: SendSignaled, SGL: sge(8192, 1024)},
	})
	require.NoError(tb, err)
	v := l.view()
	require.Equal(tb, l.s.Add(loneSent), v.maxSent, "every WQE sent")
}

// respond hands the QP one response, as its device would: from the
// peer's address (any port: the QP checks the address only).
func (l *loneRC) respond(tb testing.TB, fl rocev2.Fields, payload []byte) {
	tb.Helper()
	fl.PKey, fl.DestQP = 0xffff, l.q.QPN()
	b, err := fl.Append(nil, payload)
	require.NoError(tb, err)
	var pkt rocev2.Packet
	require.NoError(tb, pkt.Parse(b))
	dg := backend.Incoming{Buf: b, Src: netip.AddrPortFrom(l.peer.Addr(), 50000)}
	require.True(tb, l.q.HandlePacket(&pkt, &dg), "the packet passed the QP's header checks")
}

// qpView is what a response may change in a QP's send side.
type qpView struct {
	state                   State
	comp, req, maxSent      rocev2.PSN
	retryLeft, rnrLeft      uint8
	retryActive, rnrWait    bool
	head, sreq, tail        uint64
	ordInUse                int
	sendWRs, sendPkts, naks uint64 // completions taken, packets sent, NAKs counted
}

func (l *loneRC) view() qpView {
	q := l.q
	q.mu.Lock()
	v := qpView{
		state: q.state, comp: q.comp.psn, req: q.req.psn, maxSent: q.req.maxSent,
		retryLeft: q.comp.retryLeft, rnrLeft: q.comp.rnrLeft, retryActive: q.comp.retryActive, rnrWait: q.req.rnrWait,
		head: q.sq.head, sreq: q.sq.req, tail: q.sq.tail, ordInUse: q.req.ordInUse,
	}
	q.mu.Unlock()
	c := &l.dev.Counters
	v.sendPkts, v.naks = c.SentPkts.Load(), c.RcvdNAKs.Load()+c.RcvdRNRErr.Load()+c.RcvdSeqErr.Load()
	v.sendWRs = uint64(l.cq.Poll(l.wcs))
	return v
}

func (l *loneRC) ghosts() uint64 { return l.dev.Counters.RcvdGhostResp.Load() }
