package smcr

import (
	"fmt"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/smcr/smcwire"
)

// cursorOf returns the CDC cursor of a byte count in an RMB of size bytes.
func cursorOf(n, size uint64) smcwire.Cursor {
	return smcwire.Cursor{Wrap: uint16(n / size), Count: uint32(n % size)}
}

// cdcFieldsLocked fills f with the connection's cursors and sticky flags
// and the next sequence number. mu is held.
func (s *smcConn) cdcFieldsLocked(f *smcwire.CDCFields) {
	s.txSeq++
	f.Seq = s.txSeq
	f.Token = s.peerTok
	f.Prod = cursorOf(s.sent, s.peerSize)
	f.Cons = cursorOf(s.consumed, uint64(len(s.rmb)))
	// The state flags are cumulative, as Linux's: once sent they stay in
	// every later CDC (a close after a shutdown sends 0xC0).
	if s.doneWriting {
		f.ConnFlags |= smcwire.CDCPeerDoneWriting
	}
	switch {
	case s.aborted:
		f.ConnFlags |= smcwire.CDCPeerConnAbort
	case s.closed:
		f.ConnFlags |= smcwire.CDCPeerConnClosed
	}
	s.announced = s.consumed
}

// postCDCLocked posts, on link l, a CDC with f's flags in slot sl, after
// writes. The cursors are read, the sequence number taken and the post
// made under mu, so CDCs leave in sequence order and never announce a
// byte whose WRITE is not posted before them.
func (s *smcConn) postCDCLocked(l *link, sl *txSlot, f *smcwire.CDCFields, writes []qp.SendWR) error {
	s.cdcFieldsLocked(f)
	msg := smcwire.AppendCDC(sl.cdc[:0], f)
	sl.conn, sl.ackTo, sl.seq = s, s.sent, f.Seq
	s.posted++
	if err := l.send(sl, msg, writes); err != nil {
		s.posted-- // not posted: no completion comes
		return err
	}
	return nil
}

// sendCDC sends a CDC carrying only cursors and flags (a consumer update,
// a close), waiting for a send slot until cancel. While the connection
// moves it sends nothing: the failover's CDC carries the same. On a link
// that is down and not left yet it waits for the move (until cancel) and
// sends on the new link: a close must not fail because one path went,
// and its FIN should not leave before its CDC.
func (s *smcConn) sendCDC(cancel <-chan struct{}) error {
	for {
		s.mu.Lock()
		l, moved, moving := s.lnk, s.moved, s.resending
		s.mu.Unlock()
		if moving {
			return nil
		}
		sl, err := l.slot(cancel)
		if err == errCanceled {
			return err
		}
		if err == nil {
			s.mu.Lock()
			switch {
			case s.lnk != l || s.resending:
				s.mu.Unlock()
				l.release(sl)
				return nil // moved or moving: the failover's CDC says it
			case !l.down.Load():
				var f smcwire.CDCFields
				err := s.postCDCLocked(l, sl, &f, nil)
				s.mu.Unlock()
				if err == nil {
					return nil
				}
				// The post failed and took the link down.
			default:
				s.mu.Unlock()
				l.release(sl)
			}
		}
		select { // l is down: wait until the connection left it
		case <-moved:
		case <-s.closeDone:
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.err
		case <-cancel:
			// The move is slow (many connections move at once): its CDC
			// carries the flags and cursors, and the peer waits for it
			// (tcpwatch.go) if the FIN comes first.
			return nil
		}
	}
}

// cdcDone runs when a CDC's SEND completed (on a handler's goroutine): if
// ok, the WRITEs before it are done, so the send buffer is free up to
// ackTo, and seq is the last CDC completed. The last completion of a
// released connection deregisters its send buffer.
func (s *smcConn) cdcDone(ackTo uint64, seq uint16, ok bool) {
	s.mu.Lock()
	if ok && ackTo > s.sndAcked {
		s.sndAcked = ackTo
		wake(s.writable)
	}
	if ok && int16(seq-s.seqFin) > 0 {
		s.seqFin = seq
	}
	s.posted--
	last := s.posted == 0 && s.sndLater
	if last {
		s.sndLater = false
	}
	s.mu.Unlock()
	if last {
		s.g.freeBuffer(s.sndBuf)
	}
}

// onCDC applies a CDC from the peer (on the receive goroutine). Everything
// in it is checked: a stale sequence number is dropped and counted; a
// cursor outside its RMB, moving backwards, or claiming more than the
// buffer could hold is a protocol violation that aborts the connection
// (the peer is told, and the violation counted).
//
// It came on link l. A failover validation from a link other than the one
// the peer's CDCs came on says that the peer left that one: stop is that
// link, which the caller stops (outside the lock) before anything else
// of l is handled, so that none of its WRITEs still under way lands beside
// the ones the peer sends again on l.
func (s *smcConn) onCDC(l *link, m smcwire.CDC) (stop *link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.attached {
		// Before the CLC message that names the peer's RMB: keep the
		// latest (its cursors are absolute, its close flags sticky).
		if s.early == nil || int16(m.Seq()-s.early.Seq()) > 0 {
			s.early = append(s.early[:0], m...)
		}
		return nil
	}
	if l != s.rxLink {
		if s.rxLink != nil && m.ProdFlags()&smcwire.CDCFailoverValidate != 0 {
			stop = s.rxLink
		}
		s.rxLink = l
		s.rxMovedLocked()
	}
	s.onCDCLocked(m)
	return stop
}

// onCDCLocked is onCDC with mu held and the peer attached.
func (s *smcConn) onCDCLocked(m smcwire.CDC) {
	if s.freed || s.peerAborted {
		return
	}
	seq := m.Seq()
	if m.ProdFlags()&smcwire.CDCFailoverValidate != 0 {
		// The peer moved the connection to another link: a check, not a
		// CDC to apply (its data follows in the next).
		s.validateLocked(seq)
		s.peerMoving = true
		return
	}
	if s.rxSeen && int16(seq-s.rxSeq) < 0 { // older (an equal one is accepted, as Linux does)
		s.g.st.count(&s.g.st.stats.staleCDC)
		return
	}
	s.rxSeq, s.rxSeen = seq, true
	if s.peerMoving {
		s.peerMoving = false
		s.rxMovedLocked()
	}
	if err := s.applyCursorsLocked(m.Prod(), m.Cons()); err != nil {
		s.g.st.count(&s.g.st.stats.cdcViolation)
		s.violationLocked(err)
		return
	}
	s.rxHist[s.rxHistN%rxHistLen] = rxMark{seq, s.produced}
	s.rxHistN++
	s.rewound = false
	pf, cf := m.ProdFlags(), m.ConnFlags()
	s.peerWantsUpdate = pf&smcwire.CDCConsUpdateRequest != 0
	s.peerBlocked = pf&smcwire.CDCWriteBlocked != 0
	if pf&smcwire.CDCUrgentPresent != 0 {
		// The byte before the producer cursor is urgent. It is read in
		// band here, but a Linux sender that used MSG_OOB waits for the
		// whole RMB to be free: confirm promptly once it is read.
		s.urgent = true
	}
	if cf&smcwire.CDCPeerConnAbort != 0 {
		s.peerAborted, s.peerAbortErr = true, errAborted
		s.failLocked(errAborted)
		s.closeProgressLocked()
		return
	}
	if cf&smcwire.CDCPeerDoneWriting != 0 && !s.peerDoneWriting {
		s.peerDoneWriting = true
		s.wakeReader()
	}
	if cf&smcwire.CDCPeerConnClosed != 0 && !s.peerClosed {
		s.peerClosed = true
		s.wakeReader()
		wake(s.writable)
	}
	if s.peerWantsUpdate && s.consumed > s.announced {
		s.g.askConsumerUpdate(s)
	}
	s.closeProgressLocked()
}

// rxMovedLocked wakes whoever waits for the peer's side of the
// connection to move (or to finish moving). mu is held.
func (s *smcConn) rxMovedLocked() {
	close(s.rxMoved)
	s.rxMoved = make(chan struct{})
}

// applyCursorsLocked moves the producer cursor (the peer's writes into our
// RMB) and the peer's consumer cursor (its reading of the writes we made
// into its RMB) to a CDC's, after checking them.
func (s *smcConn) applyCursorsLocked(prod, cons smcwire.Cursor) error {
	size := uint64(len(s.rmb))
	if uint64(prod.Count) >= size {
		return fmt.Errorf("producer cursor %d:%d outside our %d-byte RMB", prod.Wrap, prod.Count, size)
	}
	if uint64(cons.Count) >= s.peerSize {
		return fmt.Errorf("consumer cursor %d:%d outside the peer's %d-byte RMB", cons.Wrap, cons.Count, s.peerSize)
	}
	// A cursor behind the one known is ignored (Linux's rule): a CDC
	// never takes back what an earlier one announced.
	if prod.Before(s.prodC) {
		prod = s.prodC
	}
	if cons.Before(s.peerConsC) {
		cons = s.peerConsC
	}
	produced := s.produced + uint64(prod.Diff(s.prodC, uint32(size)))
	if produced-s.consumed > size {
		return fmt.Errorf("producer cursor claims %d unread bytes in a %d-byte RMB", produced-s.consumed, size)
	}
	peerCons := s.peerCons + uint64(cons.Diff(s.peerConsC, uint32(s.peerSize)))
	if peerCons > s.sent {
		return fmt.Errorf("consumer cursor claims %d bytes read of %d written", peerCons, s.sent)
	}
	if produced != s.produced {
		s.produced, s.prodC = produced, prod
		s.wakeReader()
	}
	if peerCons != s.peerCons {
		s.peerCons, s.peerConsC = peerCons, cons
		wake(s.writable)
	}
	return nil
}

// violationLocked aborts the connection because the peer broke the
// protocol: local Reads and Writes fail, and the peer gets an abort from
// the link group's worker (a handler must not wait for a send slot).
func (s *smcConn) violationLocked(err error) {
	s.failLocked(fmt.Errorf("%w: %v", errProtocol, err))
	if !s.closed {
		s.closed, s.aborted = true, true
		s.g.askAbort(s)
	}
}
