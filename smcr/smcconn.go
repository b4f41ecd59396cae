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
// writes into) and send buffer, the peer's RMB it writes into, and the
// cursors and flags that the CDC messages of both sides move.
//
// Cursors are kept as byte counts since the connection began (uint64: they
// never wrap); a CDC carries them as (wrap, count) in the RMB it refers to.
//
//	our RMB (rmb)                   the peer's RMB (peerSize)
//	  produced: the peer's writes     sent:     our writes (posted)
//	  consumed: what we have read     peerCons: what the peer has read
//	  announced: consumed as last
//	             sent in a CDC      our send buffer (snd)
//	                                  sndHead:  bytes copied in
//	                                  sndAcked: of those, freed (CDC done)
//
// Locking: mu guards the cursors and flags; rdMu and wrMu admit one Read
// and one Write at a time. Handlers (onCDC, on the receive goroutine) take
// only mu, and wake readers and writers through the capacity-1 channels.
type smcConn struct {
	c        *Conn
	g        *linkGroup
	token    uint32
	peerTok  uint32
	rmb      []byte
	rmbMR    *device.MR
	snd      []byte
	sndMR    *device.MR
	peerVA   uint64
	peerRKey uint32
	peerSize uint64
	limit    uint64       // rmbe_update_limit: consumption worth announcing unasked
	sgl      [2][2]qp.SGE // the WRITEs' gather lists (Write is serialized by wrMu)

	rdMu, wrMu sync.Mutex
	readable   chan struct{}
	writable   chan struct{}
	rdl, wdl   *deadline
	busyPoll   time.Duration // Config.BusyPoll
	readyFn    func() bool   // readyToRead, bound once for BusyPoll

	mu        sync.Mutex
	sent      uint64
	sndHead   uint64 // bytes ever copied into the send buffer
	sndAcked  uint64 // of those, the ones whose CDC completed (free again)
	peerCons  uint64
	peerConsC smcwire.Cursor
	produced  uint64
	prodC     smcwire.Cursor
	consumed  uint64
	handed    uint64 // past consumed: in a WriteTo's hands, read as far as Close is concerned
	// abortOnClose: SetLinger(0), Close aborts.
	abortOnClose bool
	announced    uint64
	txSeq        uint16
	rxSeq        uint16
	rxSeen       bool // a CDC has arrived (rxSeq is valid)
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
	// or flushed). While any is, the send buffer stays registered even
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

var (
	errAborted      = &errnoError{"smcr: connection reset: the peer aborted it", syscall.ECONNRESET}
	errClosedWrite  = errors.New("smcr: write after CloseWrite or Close")
	errPeerClosed   = &errnoError{"smcr: broken pipe: the peer closed the connection", syscall.EPIPE}
	errConnClosed   = errors.New("smcr: use of a closed connection")
	errProtocol     = errors.New("smcr: protocol violation by the peer")
	errLinkGroupEnd = errors.New("smcr: the connection's SMC-R link group ended")
)

// newSMCConn allocates a connection's buffers on group g and registers
// them: the RMB with remote write (only the peer of g gets its rkey), the
// send buffer for local use.
func newSMCConn(g *linkGroup, cfg *Config) (*smcConn, error) {
	s := &smcConn{
		g: g, readable: make(chan struct{}, 1), writable: make(chan struct{}, 1),
		rdl: newDeadline(), wdl: newDeadline(), closeDone: make(chan struct{}),
		rmb: make([]byte, cfg.RecvBufSize), snd: make([]byte, cfg.SendBufSize),
		busyPoll: cfg.BusyPoll,
	}
	s.readyFn = s.readyToRead
	var err error
	if s.rmbMR, err = g.pd.RegisterMR(s.rmb, device.AccessLocalWrite|device.AccessRemoteWrite); err != nil {
		return nil, fmt.Errorf("smcr: register the RMB: %w", err)
	}
	if s.sndMR, err = g.pd.RegisterMR(s.snd, 0); err != nil {
		_ = s.rmbMR.Deregister()
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

// attachPeer records the peer's RMB and token from its CLC message, and
// applies a CDC that came over the link before the CLC message did (a
// client may write as soon as it has sent its Confirm).
func (s *smcConn) attachPeer(token, rkey uint32, va uint64, size uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peerTok, s.peerRKey, s.peerVA, s.peerSize = token, rkey, va, uint64(size)
	s.attached = true
	if s.early != nil {
		early := s.early
		s.early = nil
		s.onCDCLocked(early)
	}
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
	wake(s.readable)
	wake(s.writable)
	if !isClosed(s.closeDone) {
		close(s.closeDone)
	}
}

// linkGroupEnded kills the connection because its link group ended, as
// Linux's smc_conn_kill: an abort CDC if the link can still send, Read and
// Write fail, and the TCP connection is reset.
func (s *smcConn) linkGroupEnded(err error) {
	s.mu.Lock()
	s.failLocked(fmt.Errorf("%w: %v", errLinkGroupEnd, err))
	tell := !s.closed && !s.g.lnk.down.Load()
	s.closed, s.aborted = true, true
	s.mu.Unlock()
	if tell {
		_ = s.sendCDC(0, closedChan) // only if a slot is free at once
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
	now := s.posted == 0
	s.sndLater = !now
	s.mu.Unlock()
	s.rdl.stop()
	s.wdl.stop()
	g := s.g
	g.removeConn(s)
	g.deleteRKeyLater(s.rmbMR)
	if now {
		_ = s.sndMR.Deregister()
	}
}
