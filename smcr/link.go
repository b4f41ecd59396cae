package smcr

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr/smcwire"
)

// A link is one RC queue pair between this device and the peer's, with
// SMC's attributes, and the buffers of its messages:
//
//   - send slots (txSlots, like Linux's SMC_WR_BUF_CNT): every CDC takes
//     one until its SEND completes, and every LLC message one of its own
//     few (llcSlots), which together bound the messages in flight below the
//     receive WRs the peer has posted (a Linux peer posts 48), so that the
//     peer never answers RNR. LLC messages have slots of their own because
//     a busy link's writers keep every CDC slot taken: a CONFIRM_RKEY (or
//     its response) queued behind them waited as long as a whole round of
//     data, and the handshakes behind it timed out;
//   - receive slots (rxSlots), each a buffer of rxBufSize bytes that an
//     SMC-Rv2 LLC message of any length fits in, reposted by its handler.
//
// Every work request names a completion entry (cq.Entry, the ib_cqe way)
// whose Done runs on the receive goroutine when the pool runs to
// completion: a receive slot dispatches its CDC or LLC message, a send
// slot returns itself, a WRITE only reports errors.
type link struct {
	lgr    *linkGroup
	id     uint8  // link id, 1 for the first link
	userID uint32 // link user id (CONFIRM_LINK)
	qp     *qp.QP
	res    cq.Reservation
	psn    rocev2.PSN // our first send PSN

	// Set when the link connects (CLC), read-only after.
	peerQPN uint32
	peerGID smcwire.GID
	peerMAC smcwire.MAC
	mtu     rocev2.MTU

	rxBuf   []byte
	rxMR    *device.MR
	rxSlots []rxSlot
	txSlots []txSlot     // CDC slots, then LLC slots
	free    chan *txSlot // idle CDC slots
	llcFree chan *txSlot // idle LLC slots
	write   writeEntry

	down     atomic.Bool
	downOnce sync.Once
	dead     chan struct{} // closed when the link is down
	downErr  error         // why, set before dead is closed
}

const (
	txSlots   = 16   // CDC messages in flight per link
	llcSlots  = 4    // LLC messages in flight per link (one flow, the worker's answers, CONFIRM_LINK)
	rxSlots   = 48   // receive WRs posted per link (Linux: 3 x 16)
	rxBufSize = 8192 // an SMC-Rv2 LLC message's maximum length
	// sqDepth leaves room for a CDC's two RDMA WRITEs beside every CDC
	// slot.
	sqDepth = 3*txSlots + llcSlots + 1
	// smcInline is the largest message sent inline (CDC and LLC messages
	// Linux sends are 44 bytes, the largest v2 ones a few hundred).
	smcInline = 400
)

// rxSlot is one posted receive.
type rxSlot struct {
	l   *link
	sge [1]qp.SGE
	wr  [1]qp.RecvWR
}

// txSlot is one send slot; its Done returns it to the link.
type txSlot struct {
	l    *link
	pool chan *txSlot // where it goes back: free or llcFree
	// A CDC's connection, and how far its send buffer is free once the
	// CDC (and so every WRITE before it) has completed.
	conn  *smcConn
	ackTo uint64
	// sent, when set, learns that the SEND completed (true) or failed.
	sent chan<- bool
	// cdc is where a CDC message is built: the slot's own, so that
	// building and posting it allocates nothing (the SEND is inline: the
	// bytes are copied when posted).
	cdc [smcwire.CDCLen]byte
}

// writeEntry is the completion entry of RDMA WRITEs: they are posted
// unsignaled, so it runs only for errors, which take the link down.
type writeEntry struct{ l *link }

// newLink creates a link's QP in INIT with its receives posted, on the link
// group's PD and a reservation of the stack's CQs.
func newLink(g *linkGroup, id uint8) (*link, error) {
	l := &link{lgr: g, id: id, psn: qp.RandomPSN(), dead: make(chan struct{}),
		free: make(chan *txSlot, txSlots), llcFree: make(chan *txSlot, llcSlots)}
	// Linux: link user id = the group's id plus the link's.
	l.userID = g.id + uint32(id)
	l.write.l = l
	res, err := g.st.cqs.Reserve(sqDepth + rxSlots)
	if err != nil {
		return nil, fmt.Errorf("smcr: link CQs: %w", err)
	}
	l.res = res
	l.qp, err = qp.Create(g.pd, qp.InitAttr{
		Type: qp.RC, SendCQ: res.SendCQ(), RecvCQ: res.RecvCQ(),
		Cap: qp.Cap{MaxSendWR: sqDepth, MaxRecvWR: rxSlots, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: smcInline},
		// rxe treats retry count 7 as "retry forever", and SMC sets 7: a
		// lossy path slows a link down, it does not break it.
		RetryCnt7Infinite: true,
	})
	if err != nil {
		res.Release()
		return nil, fmt.Errorf("smcr: create the link's QP: %w", err)
	}
	res.Bind(l.qp.QPN())
	l.rxBuf = make([]byte, rxSlots*rxBufSize)
	if l.rxMR, err = g.pd.RegisterMR(l.rxBuf, device.AccessLocalWrite); err != nil {
		l.destroy()
		return nil, err
	}
	if err := l.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: device.AccessLocalWrite | device.AccessRemoteWrite},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags); err != nil {
		l.destroy()
		return nil, err
	}
	l.rxSlots = make([]rxSlot, rxSlots)
	for i := range l.rxSlots {
		s := &l.rxSlots[i]
		s.l = l
		s.sge[0] = qp.SGE{Addr: l.rxMR.VA() + uint64(i*rxBufSize), Length: rxBufSize, LKey: l.rxMR.LKey()}
		s.wr[0].SGL = s.sge[:]
		s.wr[0].WRID, s.wr[0].Entry = res.Tag(s)
		if _, err := l.qp.PostRecv(s.wr[:]); err != nil {
			l.destroy()
			return nil, err
		}
	}
	l.txSlots = make([]txSlot, txSlots+llcSlots)
	for i := range l.txSlots {
		s := &l.txSlots[i]
		s.l, s.pool = l, l.free
		if i >= txSlots {
			s.pool = l.llcFree
		}
		s.pool <- s
	}
	return l, nil
}

// connect moves the QP to RTR towards the peer's QP, and on to RTS:
// SMC's attributes (local ACK timeout 15, retry 7, RNR retry 7, one
// READ/atomic, as Linux sets them; SMC never reads).
func (l *link) connect(peerQPN, peerPSN uint32, peerGID smcwire.GID, peerMAC smcwire.MAC, mtu rocev2.MTU) error {
	l.peerQPN, l.peerGID, l.peerMAC, l.mtu = peerQPN, peerGID, peerMAC, mtu
	if err := l.qp.Modify(&qp.Attr{
		State: qp.RTR, PathMTU: mtu, DestQPN: peerQPN, RQPSN: rocev2.PSN(peerPSN & rocev2.PSNMask),
		MaxDestRdAtomic: 1, MinRNRTimer: 5,
		AH: qp.AH{DGID: device.GID(peerGID), SGIDIndex: 1, HopLimit: 1, DestPort: l.lgr.peerPort},
	}, qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer); err != nil {
		return fmt.Errorf("smcr: link to QP %#x: RTR: %w", peerQPN, err)
	}
	if err := l.qp.Modify(&qp.Attr{
		State: qp.RTS, SQPSN: l.psn, Timeout: 15, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1,
	}, qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic); err != nil {
		return fmt.Errorf("smcr: link to QP %#x: RTS: %w", peerQPN, err)
	}
	return nil
}

var errLinkDown = errors.New("smcr: the SMC-R link is down")

// slot takes a free CDC slot, waiting until one frees, the link goes
// down, or cancel is closed.
func (l *link) slot(cancel <-chan struct{}) (*txSlot, error) {
	return l.slotFrom(l.free, cancel, nil)
}

// llcSlot takes a free LLC slot, as slot does, and also gives up when
// stop closes.
func (l *link) llcSlot(cancel, stop <-chan struct{}) (*txSlot, error) {
	return l.slotFrom(l.llcFree, cancel, stop)
}

func (l *link) slotFrom(pool chan *txSlot, cancel, stop <-chan struct{}) (*txSlot, error) {
	select {
	case s := <-pool:
		return s, nil
	default:
	}
	select {
	case s := <-pool:
		return s, nil
	case <-l.dead:
		return nil, l.downErr
	case <-cancel:
		return nil, errCanceled
	case <-stop:
		return nil, errCanceled
	}
}

var errCanceled = errors.New("smcr: canceled")

// send posts msg (a CDC or LLC message) as a signaled, solicited inline
// SEND in slot s, after the RDMA WRITEs in writes (one post, so that they
// leave in one system call). When the SEND completes, s.conn learns that
// its send buffer is free up to s.ackTo.
func (l *link) send(s *txSlot, msg []byte, writes []qp.SendWR) error {
	var wrs [3]qp.SendWR
	n := copy(wrs[:], writes)
	w := &wrs[n]
	w.Opcode, w.Flags, w.Inline = qp.WRSend, qp.SendSignaled|qp.SendSolicited|qp.SendInline, msg
	w.WRID, w.Entry = l.res.Tag(s)
	cdc := isCDC(msg) // before the post: once posted, the slot (msg) may be reused at once
	if _, err := l.qp.PostSend(wrs[:n+1]); err != nil {
		l.release(s)
		l.fail(fmt.Errorf("smcr: post to the link's QP: %w", err))
		return l.downErr
	}
	stats.countLinkMsg(cdc, true)
	return nil
}

// release returns s unused.
func (l *link) release(s *txSlot) {
	s.conn, s.ackTo, s.sent = nil, 0, nil
	s.pool <- s
}

// Done is a send slot's completion.
func (s *txSlot) Done(wc *cq.WC) {
	l := s.l
	c, ackTo, sent := s.conn, s.ackTo, s.sent
	s.conn, s.ackTo, s.sent = nil, 0, nil
	s.pool <- s
	if sent != nil {
		sent <- wc.Status.OK() // buffered: never blocks the receive goroutine
	}
	if c != nil {
		c.cdcDone(ackTo, wc.Status.OK())
	}
	if !wc.Status.OK() {
		l.fail(fmt.Errorf("smcr: a send on the link completed with %v", wc.Status))
	}
}

// Done is a receive slot's completion: the message is handed to the link
// group, then the buffer is posted again.
func (s *rxSlot) Done(wc *cq.WC) {
	l := s.l
	if !wc.Status.OK() {
		l.fail(fmt.Errorf("smcr: a receive on the link completed with %v", wc.Status))
		return
	}
	off := int(s.sge[0].Addr - l.rxMR.VA())
	n := min(int(wc.ByteLen), rxBufSize)
	l.lgr.receive(l, l.rxBuf[off:off+n])
	// A fresh tag for every post: the legacy design's wr_id is a sequence
	// number whose pending slot its completion consumed, so a repost with
	// the old one would complete as an orphan, its message dropped and the
	// slot never posted again (the link then runs out of receives after
	// rxSlots messages and hangs in RNR). The pool's tag is the Entry.
	s.wr[0].WRID, s.wr[0].Entry = l.res.Tag(s)
	if _, err := l.qp.PostRecv(s.wr[:]); err != nil {
		l.fail(fmt.Errorf("smcr: repost a receive: %w", err))
	}
}

// Done is an RDMA WRITE's completion (errors only).
func (e *writeEntry) Done(wc *cq.WC) {
	if !wc.Status.OK() {
		e.l.fail(fmt.Errorf("smcr: an RDMA WRITE on the link completed with %v", wc.Status))
	}
}

// writeTag returns the wr_id and Entry of an unsignaled RDMA WRITE, as
// the completion design tags one (cq.Reservation.TagUnsignaled): where it
// names none, an error completion reaches the design's orphan handler,
// which takes the link down the same way.
func (l *link) writeTag() (uint64, cq.Entry) { return l.res.TagUnsignaled(&l.write) }

// fail takes the link down: it is of no further use. The link group's
// worker sees dead closed and ends the group, aborting its connections.
func (l *link) fail(err error) {
	l.downOnce.Do(func() {
		l.downErr = err
		l.down.Store(true)
		close(l.dead)
	})
}

// destroy releases the link's QP, buffers and CQ reservation; no handler of
// it runs afterwards.
func (l *link) destroy() {
	l.fail(errLinkDown)
	if l.qp != nil {
		_ = l.qp.Destroy()
	}
	// Nothing of the QP completes after Destroy; Drain waits for what was
	// pushed before to be handled.
	ctx, cancel := drainContext()
	_ = l.res.Drain(ctx)
	cancel()
	l.res.Release()
	if l.rxMR != nil {
		_ = l.rxMR.Deregister()
	}
}
