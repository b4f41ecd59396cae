package smcr

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2/device"
	"github.com/goroce/goroce/smcr/smcwire"
)

// smcConn is the SMC-R half of a connection: its RMB (the buffer the peer
// writes into) and send buffer, the peer's RMB it writes into, the link it
// sends on, and the cursors and flags that the CDC messages of both sides
// move.
//
// Cursors are kept as byte counts since the connection began (uint64: they
// never wrap); a CDC carries them as (wrap, count) in the RMB it refers to.
//
//	our RMB (rmb)                   the peer's RMB (peerSize)
//	  produced: the peer's writes     sent:     our writes (posted)
//	  consumed: what we have read     peerCons: what the peer has read
//	  announced: consumed as last
//	             sent in a CDC      our send buffer (snd): every byte
//	                                  written, from sndAcked (its CDC
//	                                  completed: free again) to sent
//
// Every byte sent stays in the send buffer until its CDC completes, so
// that a failover can write it again on another link (failover.go).
//
// Locking: mu guards the cursors, flags and link; rdMu and wrMu admit one
// Read and one Write at a time. Handlers (onCDC, on the receive goroutine)
// take only mu, and wake readers and writers through the capacity-1
// channels.
type smcConn struct {
	c        *Conn
	g        *linkGroup
	token    uint32
	peerTok  uint32
	rmb      []byte
	rmbBuf   *buffer
	snd      []byte
	sndBuf   *buffer
	peerSize uint64
	limit    uint64       // rmbe_update_limit: consumption worth announcing unasked
	sgl      [2][2]qp.SGE // the WRITEs' gather lists (built and posted under mu)

	rdMu, wrMu sync.Mutex
	readable   chan struct{}
	writable   chan struct{}
	rdl, wdl   *deadline
	busyPoll   time.Duration  // Config.BusyPoll
	readyFn    func() bool    // readyToRead, bound once for BusyPoll
	waiter     *device.Waiter // a Read's wait, in which it may serve its device (awaitReadable)

	mu sync.Mutex
	// The link the connection sends on, with the send buffer's region
	// there and the peer's RMB as that link reaches it; moved is closed
	// (and replaced) whenever it changes.
	lnk      *link
	sndVA    uint64
	sndLKey  uint32
	peerVA   uint64
	peerRKey uint32
	moved    chan struct{}
	rtIdx    int   // the peer's RMB in the group's rtokens
	rxLink   *link // the link the peer's last CDC came on
	// peerMoving: the peer's failover validation came, and the CDC that
	// follows it (the bytes again, the cursors, the close flags) not yet.
	// rxMoved is closed (and replaced) when that CDC comes or rxLink
	// changes (tcpwatch.go waits for it).
	peerMoving bool
	rxMoved    chan struct{}
	sent       uint64
	sndAcked   uint64 // of sent, the bytes whose CDC completed (free again)
	seqFin     uint16 // the sequence number of the last CDC completed
	peerCons   uint64
	peerConsC  smcwire.Cursor
	produced   uint64
	prodC      smcwire.Cursor
	consumed   uint64
	handed     uint64 // past consumed: in a WriteTo's hands, read as far as Close is concerned
	// abortOnClose: SetLinger(0), Close aborts.
	abortOnClose bool
	announced    uint64
	txSeq        uint16
	rxSeq        uint16
	rxSeen       bool // a CDC has arrived (rxSeq is valid)
	// rxHist is what the last CDCs received announced (a ring), for the
	// peer's failover validation (validateLocked).
	rxHist  [rxHistLen]rxMark
	rxHistN int
	rewound bool // a validation took bytes back: they come again in the next CDC
	// resending: a failover is moving the connection (switchLink) and
	// writes wait until it has sent everything again.
	resending bool
	// The peer's producer flags from its last CDC.
	peerWantsUpdate bool
	peerBlocked     bool
	// Close state (close.go).
	peerDoneWriting bool
	peerClosed      bool
	peerAborted     bool
	peerAbortErr    error // what reads return after peerAborted
	doneWriting     bool  // we sent peer_done_writing
	closed          bool  // we closed (sent peer_conn_closed, or aborted)
	aborted         bool  // we sent peer_conn_abort
	urgent          bool  // the peer marked urgent data: confirm it promptly
	err             error
	freed           bool
	// posted counts the CDCs posted and not yet completed (successfully
	// or flushed), on any link. While any is, the send buffer stays registered even
	// after release: a retransmission of the WRITEs before it gathers
	// from it again, and a deregistered buffer fails it with a local
	// protection error, which kills the link. sndLater: release found
	// some, and the last completion deregisters it.
	posted     int
	sndLater   bool
	closeDone  chan struct{} // closed when the connection ended
	closeTimer *time.Timer   // a closed connection's wait for the peer
	attached   bool          // the peer's RMB is known (attachPeer)
	early      smcwire.CDC   // the latest CDC that came before attachPeer

	bytesSent, bytesRecv atomic.Uint64
}

// rxHistLen is how many CDCs a connection remembers: more than a peer
// can have in flight unconfirmed (Linux and goroce: 16 per link).
const rxHistLen = 32

// rxMark is what one CDC received announced: its sequence number and the
// producer count after it.
type rxMark struct {
	seq      uint16
	produced uint64
}

var (
	errAborted      = &errnoError{"smcr: connection reset: the peer aborted it", syscall.ECONNRESET}
	errClosedWrite  = errors.New("smcr: write after CloseWrite or Close")
	errPeerClosed   = &errnoError{"smcr: broken pipe: the peer closed the connection", syscall.EPIPE}
	errConnClosed   = errors.New("smcr: use of a closed connection")
	errProtocol     = errors.New("smcr: protocol violation by the peer")
	errLinkGroupEnd = errors.New("smcr: the connection's SMC-R link group ended")
)

// newSMCConn allocates a connection's buffers on group g and registers
// them on every link of the group: the RMB with remote write (only the
// peer of g gets its rkeys), the send buffer for local use.
func newSMCConn(g *linkGroup, cfg *Config) (*smcConn, error) {
	s := &smcConn{
		g: g, readable: make(chan struct{}, 1), writable: make(chan struct{}, 1),
		rdl: newDeadline(), wdl: newDeadline(), closeDone: make(chan struct{}), moved: make(chan struct{}), rxMoved: make(chan struct{}),
		rmb: make([]byte, cfg.RecvBufSize), snd: make([]byte, cfg.SendBufSize), rtIdx: -1,
		busyPoll: cfg.BusyPoll,
	}
	s.readyFn = s.readyToRead
	s.waiter = device.NewWaiter(s.readOver)
	s.rdl.onFire = s.waiter.Kick
	g.mu.Lock()
	defer g.mu.Unlock()
	var err error
	if s.rmbBuf, err = g.newBufferLocked(s.rmb, true); err != nil {
		return nil, fmt.Errorf("smcr: register the RMB: %w", err)
	}
	if s.sndBuf, err = g.newBufferLocked(s.snd, false); err != nil {
		delete(g.bufs, s.rmbBuf)
		s.rmbBuf.deregister()
		return nil, fmt.Errorf("smcr: register the send buffer: %w", err)
	}
	// Linux: rmbe_update_limit = max(rmbe size / 10, SOCK_MIN_SNDBUF / 2).
	s.limit = max(uint64(len(s.rmb))/10, sockMinSndBuf/2)
	stats.countBuffers(len(s.rmb), len(s.snd))
	return s, nil
}

// sockMinSndBuf is Linux's SOCK_MIN_SNDBUF on x86-64: 2 * (2048 +
// SKB_TRUESIZE(1)), which rmbe_update_limit halves.
const sockMinSndBuf = 4608

// attachPeer records the peer's RMB and token from its CLC message, whose
// rkey is valid on the connection's link, and applies a CDC that came over
// the link before the CLC message did (a client may write as soon as it
// has sent its Confirm).
func (s *smcConn) attachPeer(token, rkey uint32, va uint64, size uint32) error {
	s.mu.Lock()
	l := s.lnk
	s.mu.Unlock()
	s.g.mu.Lock()
	i := s.g.rtokenAddLocked(l.idx, rkey, va)
	s.g.mu.Unlock()
	if i < 0 {
		return fmt.Errorf("smcr: the peer has as many RMBs in the link group as it takes (%d)", maxRTokens)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rtIdx = i
	s.peerTok, s.peerRKey, s.peerVA, s.peerSize = token, rkey, va, uint64(size)
	s.attached = true
	if s.early != nil {
		early := s.early
		s.early = nil
		s.onCDCLocked(early)
	}
	return nil
}

// link returns the link the connection sends on.
func (s *smcConn) link() *link {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lnk
}

// wakeReader wakes a Read that waits: on its channel, or, serving its
// device meanwhile (awaitReadable), by a kick.
func (s *smcConn) wakeReader() {
	wake(s.readable)
	s.waiter.Kick()
}

// wake sends a non-blocking wake-up on ch.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// fail ends the connection with err (a dead link, an abort, a protocol
// violation): blocked Reads and Writes return it. mu is held.
func (s *smcConn) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	s.wakeReader()
	wake(s.writable)
	if !isClosed(s.closeDone) {
		close(s.closeDone)
	}
}

// linkGroupEnded kills the connection because its link group ended, as
// Linux's smc_conn_kill: an abort CDC if a link can still send (tell),
// Read and Write fail, and the TCP connection is reset.
func (s *smcConn) linkGroupEnded(err error, tell bool) {
	s.mu.Lock()
	s.failLocked(fmt.Errorf("%w: %v", errLinkGroupEnd, err))
	tell = tell && !s.closed
	s.closed, s.aborted = true, true
	s.mu.Unlock()
	if tell {
		_ = s.sendCDC(closedChan) // only if a slot is free at once
	}
	if s.c != nil {
		s.c.reset.Store(true)
	}
	s.finish()
}

// release frees the buffers and leaves the link group (DELETE_RKEY for the
// RMB goes to the peer from a flow of the group). Once only.
func (s *smcConn) release() {
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return
	}
	s.freed = true
	l := s.lnk
	// The send buffer stays registered while a CDC is posted: a WRITE
	// before it may still be sent again from there (RC's retransmission
	// reads the region), and one deregistered under it fails with a
	// local protection error, which kills the link.
	now := s.posted == 0
	s.sndLater = !now
	s.mu.Unlock()
	s.rdl.stop()
	s.wdl.stop()
	g := s.g
	g.removeConn(s)
	if l != nil {
		l.conns.Add(-1)
	}
	g.deleteRKeyLater(s.rmbBuf)
	if now {
		g.freeBuffer(s.sndBuf)
	}
}
