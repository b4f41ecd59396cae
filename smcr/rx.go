package smcr

import (
	"io"
	"os"
)

// The receive path: the peer's RDMA WRITEs land in the RMB without us; its
// CDC moves the producer cursor (onCDC) and wakes a waiting Read, which
// copies from the RMB and moves the consumer cursor. Whether that is worth
// a CDC of its own follows Linux (smc_tx_consumer_update): when the peer
// asked for it, or when more than rmbe_update_limit bytes were read since
// the last announcement and the peer sees at most half of the RMB free or
// said it is blocked. Otherwise the next CDC carries the cursor along (a
// response's, in a request/response exchange).

// read copies what has arrived into p, waiting for at least one byte, the
// end of the stream (io.EOF once the peer is done writing and all is read),
// an error, or the read deadline.
func (s *smcConn) read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rdMu.Lock()
	defer s.rdMu.Unlock()
	for {
		s.mu.Lock()
		if avail := s.produced - s.consumed; avail > 0 {
			s.countRxSizesLocked(len(p), avail)
			n := s.copyOutLocked(p, avail)
			update := s.updateDueLocked()
			s.mu.Unlock()
			s.bytesRecv.Add(uint64(n))
			stats.countRx(len(p), n)
			if update {
				_ = s.sendConsumerUpdate(true)
			}
			return n, nil
		}
		err := s.readErrLocked()
		l := s.lnk // the device the connection's link is on is the one polled
		s.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if s.busyPoll > 0 && l != nil && l.dev.dev.BusyPoll(s.busyPoll, s.readyFn) {
			continue
		}
		if !s.awaitReadable(l) {
			return 0, os.ErrDeadlineExceeded
		}
	}
}

// awaitReadable waits until a Read may find something (bytes, the end,
// an error) and reports false once the read deadline has passed instead.
// Where nobody else serves the device of the connection's link l, the
// waiting goroutine serves it itself until then (device.WaitOn): the
// packet that brings the data wakes this goroutine, not the receive
// goroutine, which would then have to wake this one. rdMu is held.
func (s *smcConn) awaitReadable(l *link) bool {
	if l == nil {
		return s.awaitReadableChan()
	}
	dev := l.dev.dev
	if dev.WaitOn(s.waiter) {
		select {
		case <-s.readable: // its own wake-up, from the batch it ran: spent
		default:
		}
		return !s.rdl.passed()
	}
	defer dev.EndWait(s.waiter)
	return s.awaitReadableChan()
}

func (s *smcConn) awaitReadableChan() bool {
	select {
	case <-s.readable:
		return true
	case <-s.rdl.wait():
		return false
	}
}

// readOver is the Waiter's ready: a Read would not wait, or its deadline
// has passed.
func (s *smcConn) readOver() bool { return s.readyToRead() || s.rdl.passed() }

// readyToRead reports whether a Read would return without waiting.
func (s *smcConn) readyToRead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.produced != s.consumed || s.readErrLocked() != nil
}

// copyOutLocked copies up to avail bytes from the RMB at the consumer
// cursor into p (in two pieces where the RMB wraps) and advances it.
func (s *smcConn) copyOutLocked(p []byte, avail uint64) int {
	size := uint64(len(s.rmb))
	n := 0
	for n < len(p) && avail > 0 {
		off := s.consumed % size
		k := copy(p[n:], s.rmb[off:off+min(avail, size-off)])
		n += k
		avail -= uint64(k)
		s.consumed += uint64(k)
	}
	return n
}

// readErrLocked is why a Read with nothing to read returns, if it does.
func (s *smcConn) readErrLocked() error {
	switch {
	case s.peerAborted:
		return s.peerAbortErr
	case s.rewound && s.err == nil:
		return nil // bytes taken back come again before the end
	case s.peerDoneWriting || s.peerClosed:
		return io.EOF
	case s.err != nil:
		return s.err
	case s.closed:
		return errConnClosed
	}
	return nil
}

// updateDueLocked decides whether what was just read deserves a consumer
// update of its own (see the top of this file).
func (s *smcConn) updateDueLocked() bool {
	if s.closed || s.peerClosed {
		return false
	}
	toConfirm := s.consumed - s.announced
	if s.peerWantsUpdate && toConfirm > 0 {
		return true
	}
	if s.urgent && s.consumed == s.produced && toConfirm > 0 {
		s.urgent = false
		return true
	}
	if toConfirm <= s.limit {
		return false
	}
	senderFree := uint64(len(s.rmb)) - (s.produced - s.announced)
	return senderFree <= uint64(len(s.rmb))/2 || s.peerBlocked
}

// sendConsumerUpdate sends the consumer cursor in a CDC of its own, if
// anything was read since it was last sent. wait says whether it may wait
// for a send slot (a reader may; the link group's worker, asked by a
// handler, may too).
func (s *smcConn) sendConsumerUpdate(wait bool) error {
	s.mu.Lock()
	due := s.consumed > s.announced && !s.closed && s.err == nil
	s.mu.Unlock()
	if !due {
		return nil
	}
	var cancel <-chan struct{}
	if !wait {
		cancel = closedChan
	}
	return s.sendCDC(cancel)
}

// closedChan is a closed channel: a wait on it gives up at once.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// writeTo copies what the connection receives to w until EOF
// (io.WriterTo): straight from the RMB, without a buffer of its own,
// while its group has a single link. With two, a failover may write
// bytes again into the RMB (failover.go) while w reads them: then each
// piece is copied out under the lock first, as Read does.
func (s *smcConn) writeTo(w io.Writer) (int64, error) {
	s.rdMu.Lock()
	defer s.rdMu.Unlock()
	var total int64
	var buf []byte
	for {
		s.mu.Lock()
		avail := s.produced - s.consumed
		if avail == 0 {
			err := s.readErrLocked()
			l := s.lnk
			s.mu.Unlock()
			if err == io.EOF {
				return total, nil
			}
			if err != nil {
				return total, err
			}
			if !s.awaitReadable(l) {
				return total, os.ErrDeadlineExceeded
			}
			continue
		}
		size := uint64(len(s.rmb))
		off := s.consumed % size
		chunk := s.rmb[off : off+min(avail, size-off)]
		if s.g.redundant.Load() {
			if buf == nil {
				buf = make([]byte, size)
			}
			chunk = buf[:copy(buf, chunk)]
		}
		s.handed = uint64(len(chunk))
		s.mu.Unlock()
		// The peer writes only into free space: the bytes of chunk stay
		// as they are until the consumer cursor moves past them.
		n, err := w.Write(chunk)
		s.mu.Lock()
		s.consumed += uint64(n)
		s.handed = 0
		update := s.updateDueLocked()
		s.mu.Unlock()
		total += int64(n)
		s.bytesRecv.Add(uint64(n))
		stats.countRx(len(chunk), n)
		if update {
			_ = s.sendConsumerUpdate(true)
		}
		if err != nil {
			return total, err
		}
	}
}
