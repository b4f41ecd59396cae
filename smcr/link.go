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

// A link is one RC queue pair between one of this stack's devices and one
// of the peer's, with SMC's attributes, and the buffers of its messages:
//
//   - send slots (txSlots, like Linux's SMC_WR_BUF_CNT): every CDC takes
//     one until its SEND completes, and every LLC message one of its own
//     few (llcSlots), which together bound the messages in flight below the
//     receive WRs the peer has posted (a Linux peer posts 48), so that the
//     peer never answers RNR. LLC messages have slots of their own because
//     a busy link's writers keep every CDC slot taken: a CONFIRM_RKEY (or
//     its response) queued behind them waited as long as a whole round of
//     data, and the handshakes behind it timed out. An LLC slot has a
//     buffer for an SMC-Rv2 message too long to go inline (an ADD_LINK
//     with the rkeys of every RMB);
//   - receive slots (rxSlots), each a buffer of rxBufSize bytes that an
//     SMC-Rv2 LLC message of any length fits in, reposted by its handler.
//
// Each link has a protection domain of its own, as Linux gives it one:
// the link group's buffers are registered on every link (each with its
// own keys), and what is registered on a link is reachable through its
// queue pair only, so that once the queue pair is gone its regions can go.
//
// Every work request names a completion entry (cq.Entry, the ib_cqe way)
// whose Done runs on the receive goroutine when the pool runs to
// completion: a receive slot dispatches its CDC or LLC message, a send
// slot returns itself, a WRITE only reports errors.
type link struct {
	lgr    *linkGroup
	dev    *smcDevice
	pd     *device.PD
	idx    int    // slot in the group's links (Linux's link_idx)
	id     uint8  // link id: the server assigns it
	userID uint32 // link user id (CONFIRM_LINK)
	qp     *qp.QP
	res    cq.Reservation
	psn    rocev2.PSN // our first send PSN

	// Set when the link connects (and peerUserID when it is confirmed),
	// under the group's mu: the group lists a link it adds before then.
	peerQPN    uint32
	peerGID    smcwire.GID
	peerMAC    smcwire.MAC
	peerUserID uint32
	mtu        rocev2.MTU

	rxBuf   []byte
	rxMR    *device.MR
	rxSlots []rxSlot
	llcBuf  []byte
	llcMR   *device.MR
	txSlots []txSlot     // CDC slots, then LLC slots
	free    chan *txSlot // idle CDC slots
	llcFree chan *txSlot // idle LLC slots
	write   writeEntry

	state    atomic.Int32 // linkState
	down     atomic.Bool
	downOnce sync.Once
	dead     chan struct{} // closed when the link is down
	downErr  error         // why, set before dead is closed
	cleared  atomic.Bool   // a flow handles its failure
	// retired: the link did not fail, a symmetric link replaced it (it
	// was the asymmetric one): its DELETE_LINK says NO_ASYM_NEEDED.
	retired atomic.Bool
	// confirmed: the link was active (CONFIRM_LINK done); the group
	// handles its failure, else the flow that sets it up does.
	confirmed atomic.Bool
	asym      bool        // under the group's mu: an asymmetric link, which new connections do not use
	reported  atomic.Bool // Config.OnLink was told it is up

	lastRx   atomic.Int64  // mono of the last message received
	testing  atomic.Bool   // a TEST_LINK of this link runs
	testResp chan struct{} // its response came

	// A failover's TEST_LINK (barrier): one at a time, each with a tag
	// of its own, the latest answer's tag passed on.
	barrierMu   sync.Mutex
	barrierTag  atomic.Uint64
	barrierResp chan uint64

	conns          atomic.Int32  // connections whose sends use the link
	txMsgs, rxMsgs atomic.Uint64 // CDC and LLC messages sent and received
}

// linkState is a link's life, as Linux's smc_link_state.
type linkState int32

const (
	linkActivating linkState = iota // set up: first contact, ADD_LINK
	linkActive                      // confirmed: carries connections
	linkInactive                    // down: its connections move away, then it is cleared
)

func (s linkState) String() string {
	switch s {
	case linkActivating:
		return "ACTIVATING"
	case linkActive:
		return "ACTIVE"
	}
	return "INACTIVE"
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
	// A CDC's connection, how far its send buffer is free once the CDC
	// (and so every WRITE before it) has completed, and its sequence
	// number: the last one completed is what a failover validates.
	conn  *smcConn
	ackTo uint64
	seq   uint16
	// sent, when set, learns that the SEND completed (true) or failed.
	sent chan<- bool
	// cdc is where a CDC message is built: the slot's own, so that
	// building and posting it allocates nothing (the SEND is inline: the
	// bytes are copied when posted).
	cdc [smcwire.CDCLen]byte
	// buf, of an LLC slot, holds a message too long to go inline.
	buf []byte
	sge [1]qp.SGE
}

// writeEntry is the completion entry of RDMA WRITEs: they are posted
// unsignaled, so it runs only for errors, which take the link down.
type writeEntry struct{ l *link }

// newLink creates a link's QP on device d in INIT with its receives
// posted, on a protection domain of its own and a reservation of the
// device's CQs. The group registers its buffers on it (registerLink).
func newLink(g *linkGroup, d *smcDevice, idx int, id uint8) (*link, error) {
	l := &link{lgr: g, dev: d, pd: d.dev.AllocPD(), idx: idx, id: id, psn: qp.RandomPSN(), dead: make(chan struct{}),
		free: make(chan *txSlot, txSlots), llcFree: make(chan *txSlot, llcSlots), testResp: make(chan struct{}, 1),
		barrierResp: make(chan uint64, 1)}
	l.setID(id)
	l.write.l = l
	l.lastRx.Store(mono())
	res, err := d.cqs.Reserve(sqDepth + rxSlots)
	if err != nil {
		return nil, fmt.Errorf("smcr: link CQs: %w", err)
	}
	l.res = res
	l.qp, err = qp.Create(l.pd, qp.InitAttr{
		Type: qp.RC, SendCQ: res.SendCQ(), RecvCQ: res.RecvCQ(),
		Cap: qp.Cap{MaxSendWR: sqDepth, MaxRecvWR: rxSlots, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: smcInline},
		// rxe treats retry count 7 as "retry forever", and SMC sets 7: a
		// lossy path slows a link down, it does not break it (a dead one
		// is found by TEST_LINK, or by its device losing its address).
		RetryCnt7Infinite: true,
	})
	if err != nil {
		res.Release()
		return nil, fmt.Errorf("smcr: create the link's QP: %w", err)
	}
	res.Bind(l.qp.QPN())
	d.addLink(l)
	if err := l.setup(); err != nil {
		l.destroy()
		return nil, err
	}
	return l, nil
}

// setup registers the link's message buffers, moves the QP to INIT and
// posts the receives.
func (l *link) setup() error {
	var err error
	l.rxBuf = make([]byte, rxSlots*rxBufSize)
	if l.rxMR, err = l.pd.RegisterMR(l.rxBuf, device.AccessLocalWrite); err != nil {
		return err
	}
	l.llcBuf = make([]byte, llcSlots*rxBufSize)
	if l.llcMR, err = l.pd.RegisterMR(l.llcBuf, 0); err != nil {
		return err
	}
	if err := l.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: device.AccessLocalWrite | device.AccessRemoteWrite},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags); err != nil {
		return err
	}
	l.rxSlots = make([]rxSlot, rxSlots)
	for i := range l.rxSlots {
		s := &l.rxSlots[i]
		s.l = l
		s.sge[0] = qp.SGE{Addr: l.rxMR.VA() + uint64(i*rxBufSize), Length: rxBufSize, LKey: l.rxMR.LKey()}
		s.wr[0].SGL = s.sge[:]
		s.wr[0].WRID, s.wr[0].Entry = l.res.Tag(s)
		if _, err := l.qp.PostRecv(s.wr[:]); err != nil {
			return err
		}
	}
	l.txSlots = make([]txSlot, txSlots+llcSlots)
	for i := range l.txSlots {
		s := &l.txSlots[i]
		s.l, s.pool = l, l.free
		if i >= txSlots {
			s.pool = l.llcFree
			off := (i - txSlots) * rxBufSize
			s.buf = l.llcBuf[off : off+rxBufSize]
			s.sge[0] = qp.SGE{Addr: l.llcMR.VA() + uint64(off), LKey: l.llcMR.LKey()}
		}
		s.pool <- s
	}
	return nil
}

// setID gives the link its id and, with it, its user id (Linux: the
// group's id plus the link's).
func (l *link) setID(id uint8) {
	l.id = id
	l.userID = l.lgr.id + uint32(id)
}

// confirm records the peer's link user id from its CONFIRM_LINK.
func (l *link) confirm(cl smcwire.ConfirmLink) {
	l.lgr.mu.Lock()
	l.peerUserID = cl.LinkUserID()
	l.lgr.mu.Unlock()
}

// linkState returns the link's state.
func (l *link) linkState() linkState { return linkState(l.state.Load()) }

// active reports whether the link carries connections.
func (l *link) active() bool { return l.linkState() == linkActive && !l.down.Load() }

// connect moves the QP to RTR towards the peer's QP, and on to RTS:
// SMC's attributes (local ACK timeout 15, retry 7, RNR retry 7, one
// READ/atomic, as Linux sets them; SMC never reads).
func (l *link) connect(peerQPN, peerPSN uint32, peerGID smcwire.GID, peerMAC smcwire.MAC, mtu rocev2.MTU) error {
	l.lgr.mu.Lock()
	l.peerQPN, l.peerGID, l.peerMAC, l.mtu = peerQPN, peerGID, peerMAC, mtu
	l.lgr.mu.Unlock()
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
	// A slot frees when its send completes, which the receive path
	// brings: the device must be served meanwhile.
	l.dev.dev.BeginWait()
	defer l.dev.dev.EndWait(nil)
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

// sendLLC sends an LLC message (request or response) on the link,
// waiting for an LLC slot until cancel or stop.
func (l *link) sendLLC(msg []byte, cancel, stop <-chan struct{}) error {
	sl, err := l.llcSlot(cancel, stop)
	if err != nil {
		return err
	}
	return l.send(sl, msg, nil)
}

// send posts msg (a CDC or LLC message) as a signaled, solicited SEND in
// slot s, after the RDMA WRITEs in writes (one post, so that they leave
// in one system call): inline, or from the slot's buffer when too long.
// When the SEND completes, s.conn learns that its send buffer is free up
// to s.ackTo.
func (l *link) send(s *txSlot, msg []byte, writes []qp.SendWR) error {
	var wrs [3]qp.SendWR
	n := copy(wrs[:], writes)
	l.buildSend(&wrs[n], s, msg)
	return l.post(s, wrs[:n+1])
}

// buildSend fills w with the SEND of msg in slot s.
func (l *link) buildSend(w *qp.SendWR, s *txSlot, msg []byte) {
	w.Opcode, w.Flags = qp.WRSend, qp.SendSignaled|qp.SendSolicited
	if len(msg) <= smcInline || s.buf == nil {
		w.Flags |= qp.SendInline
		w.Inline = msg
	} else {
		s.sge[0].Length = uint32(copy(s.buf, msg))
		w.SGL = s.sge[:]
	}
	w.WRID, w.Entry = l.res.Tag(s)
}

// post posts wrs, the last of them slot s's SEND; a failed post takes the
// link down and gives s back.
func (l *link) post(s *txSlot, wrs []qp.SendWR) error {
	m := wrs[len(wrs)-1].Inline
	if m == nil {
		m = s.buf
	}
	cdc := isCDC(m) // before the post: once posted, the slot (msg) may be reused at once
	if _, err := l.qp.PostSend(wrs); err != nil {
		l.release(s)
		l.fail(fmt.Errorf("smcr: post to the link's QP: %w", err))
		return l.downErr
	}
	l.txMsgs.Add(1)
	stats.countLinkMsg(cdc, true)
	return nil
}

// release returns s unused.
func (l *link) release(s *txSlot) {
	s.conn, s.ackTo, s.seq, s.sent = nil, 0, 0, nil
	s.pool <- s
}

// Done is a send slot's completion.
func (s *txSlot) Done(wc *cq.WC) {
	l := s.l
	c, ackTo, seq, sent := s.conn, s.ackTo, s.seq, s.sent
	s.conn, s.ackTo, s.seq, s.sent = nil, 0, 0, nil
	s.pool <- s
	if sent != nil {
		sent <- wc.Status.OK() // buffered: never blocks the receive goroutine
	}
	if c != nil {
		c.cdcDone(ackTo, seq, wc.Status.OK())
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
	l.lastRx.Store(mono())
	l.rxMsgs.Add(1)
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
// worker moves its connections to another link, or ends the group if it
// was the last.
func (l *link) fail(err error) {
	l.downOnce.Do(func() {
		l.downErr = err
		l.state.Store(int32(linkInactive))
		l.down.Store(true)
		close(l.dead)
		l.lgr.linkFailed(l)
	})
}

// quiesce stops the queue pair of a link that is down: in the error
// state it sends nothing more (so that nothing it still had to send
// lands in the peer's buffers after the connections moved away and wrote
// there anew) and flushes its work requests.
func (l *link) quiesce() {
	_ = l.qp.Modify(&qp.Attr{State: qp.Err}, qp.MaskState)
}

// destroy releases the link's QP, buffers and CQ reservation; no handler of
// it runs afterwards.
func (l *link) destroy() {
	l.fail(errLinkDown)
	if l.qp != nil {
		_ = l.qp.Destroy()
		l.dev.removeLink(l)
	}
	// Nothing of the QP completes after Destroy; Drain waits for what was
	// pushed before to be handled.
	ctx, cancel := drainContext()
	_ = l.res.Drain(ctx)
	cancel()
	l.res.Release()
	for _, mr := range []*device.MR{l.rxMR, l.llcMR} {
		if mr != nil {
			_ = mr.Deregister()
		}
	}
}
