package smcr

import (
	"context"
	"fmt"
	"time"
)

// Closing follows Linux's smc_close.c in what goes on the wire, with the
// states kept as flags (see smcConn):
//
//	local call / peer CDC            sends                      then
//	─────────────────────            ─────                      ────
//	CloseWrite                       peer_done_writing          reads go on; Read returns io.EOF
//	                                                            once the peer is done too
//	Close, nothing unread            peer_conn_closed (with     the connection ends when the
//	                                 done_writing if sent)      peer closed too (or at closeWait)
//	Close with unread data, or       peer_conn_abort (with      the connection ends when the
//	  after an error, or after       done_writing if sent)      peer answers (or at closeWait;
//	  SetLinger(0)                                              at once after a peer abort)
//
// The flags are cumulative, as Linux's: a CDC repeats every flag sent
// before. The TCP connection follows as Linux's internal socket does:
// CloseWrite sends its FIN after the done-writing CDC, an active Close
// shuts it down after the closing CDC, and it is closed when the SMC
// connection ends.
//	peer's peer_done_writing         -                          Read returns io.EOF after the data
//	peer's peer_conn_closed          -                          Read io.EOF; Write fails (EPIPE)
//	peer's peer_conn_abort           -                          Read and Write fail (ECONNRESET);
//	                                                            ends once closed locally
//	link group ends                  -                          Read and Write fail
//
// A connection that has ended leaves its link group (CDCs for its token
// are counted and dropped), closes its TCP connection, and gives its RMB
// back only once the peer confirmed a DELETE_RKEY for it: until then the
// peer may still have WRITEs in flight, and a WRITE to a deregistered RMB
// would take the whole link down.

// closeWait bounds how long a closed connection waits for the peer to close
// too before it aborts.
const closeWait = 30 * time.Second

// closeSlotWait bounds how long Close waits for a send slot for its CDC.
const closeSlotWait = 2 * time.Second

// closeWrite sends peer_done_writing (shutdown(SHUT_WR)).
func (s *smcConn) closeWrite() error {
	s.wrMu.Lock() // after any Write in progress: its data goes first
	defer s.wrMu.Unlock()
	s.mu.Lock()
	if s.doneWriting || s.closed {
		s.mu.Unlock()
		return nil
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.doneWriting = true
	s.mu.Unlock()
	err := s.sendFlagCDC()
	// As Linux: the TCP connection's FIN follows the done-writing CDC.
	if s.c != nil {
		_ = s.c.tcp.CloseWrite()
	}
	return err
}

// close ends the connection (see the table above). Writes in progress
// finish first; a Read in progress returns.
func (s *smcConn) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	// Bytes a WriteTo has handed to its writer are read: the application
	// may have them already (and may close because it has them).
	abort := s.produced > s.consumed+s.handed || (s.err != nil && !s.peerAborted) || s.peerAborted || s.abortOnClose
	active := !s.peerClosed && !s.peerDoneWriting && !s.peerAborted
	s.closed = true
	s.aborted = abort
	s.wakeReader()
	wake(s.writable)
	tellPeer := !s.g.dead.Load() && !s.freed
	s.mu.Unlock()

	if tellPeer {
		s.wrMu.Lock() // a Write in progress posts its data first
		_ = s.sendFlagCDC()
		s.wrMu.Unlock()
	}
	if active && s.c != nil {
		// As Linux: an active close shuts the TCP connection down right
		// after its CDC (the socket itself is released when the SMC close
		// completes). Its reading side stays open (a shutdown of it sends
		// nothing): the watch goes on seeing a peer that dies before it
		// closes.
		_ = s.c.tcp.CloseWrite()
	}
	s.mu.Lock()
	if abort {
		s.failLocked(errConnClosed)
	}
	// An abort waits for the peer's answer too, as Linux's
	// PEERCLOSEWAIT1: a WRITE of the peer's may still be on its way into
	// the RMB, and a DELETE_RKEY sent now would race it (a Linux peer was
	// seen to write with the rkey it had just deleted, which takes the
	// link down).
	end := s.peerClosed || s.peerAborted || !tellPeer
	if !end && !s.freed {
		// Wait for the peer's close in the background; give up after
		// closeWait with an abort.
		s.closeTimer = time.AfterFunc(closeWait, s.closeTimeout)
	}
	s.mu.Unlock()
	if end {
		s.finish()
	}
	return nil
}

// sendFlagCDC sends a CDC with the connection's close flags, waiting at
// most closeSlotWait for a send slot.
func (s *smcConn) sendFlagCDC() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeSlotWait)
	defer cancel()
	if err := s.sendCDC(ctx.Done()); err != errCanceled {
		return err
	}
	return fmt.Errorf("smcr: no send slot for the close's CDC within %v: the link is congested or its peer stopped answering (the connection ends when TEST_LINK finds it dead)", closeSlotWait)
}

// closeProgressLocked ends a closed connection once the peer has closed
// or aborted too (called after every CDC). mu is held.
func (s *smcConn) closeProgressLocked() {
	if s.closed && (s.peerClosed || s.peerAborted) && !s.freed {
		if !isClosed(s.closeDone) {
			close(s.closeDone)
		}
		// Not on the receive goroutine: ending closes a socket and
		// starts an LLC flow.
		s.g.spawn(s.finish)
	}
}

// closeTimeout aborts a connection whose peer did not close in time.
func (s *smcConn) closeTimeout() {
	s.mu.Lock()
	done := s.freed || s.peerClosed || s.peerAborted
	s.mu.Unlock()
	if done {
		return
	}
	s.mu.Lock()
	s.aborted = true
	s.mu.Unlock()
	_ = s.sendFlagCDC()
	s.finish()
}

// finish ends the connection: it leaves its link group, closes its TCP
// connection, and releases its buffers (the RMB after DELETE_RKEY).
func (s *smcConn) finish() {
	s.mu.Lock()
	if s.closeTimer != nil {
		s.closeTimer.Stop()
	}
	if !isClosed(s.closeDone) {
		close(s.closeDone)
	}
	s.mu.Unlock()
	s.release()
	if s.c != nil {
		s.c.closeTCP()
	}
}

// askAbort has the link group's worker send an abort for s and end it (a
// handler found the peer in violation and must not wait for a slot).
func (g *linkGroup) askAbort(s *smcConn) {
	g.spawn(func() {
		_ = s.sendFlagCDC()
		s.finish()
	})
}
