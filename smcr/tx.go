package smcr

import (
	"io"
	"os"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/smcr/smcwire"
)

// The send path: Write returns once every byte it was given is posted (an
// RDMA WRITE into the peer's RMB, then a CDC announcing it), waiting for
// room in the peer's RMB as TCP waits for its send window. Every byte is
// copied into the send buffer, where it stays until its CDC completes (a
// retransmission rebuilds the WRITE from it, a failover writes it again on
// another link); a small write is also posted inline (the QP copies it
// into the work request). The WRITEs and the CDC leave in one post, and so
// in one system call.

// inlineMax is the largest write sent inline.
const inlineMax = smcInline

// write posts all of p.
func (s *smcConn) write(p []byte) (int, error) {
	s.wrMu.Lock()
	defer s.wrMu.Unlock()
	s.countTxSizes(len(p))
	n := 0
	for n < len(p) {
		k, err := s.writeSome(p[n:])
		n += k
		if err != nil {
			stats.countTx(len(p), n)
			return n, err
		}
	}
	stats.countTx(len(p), n)
	return n, nil
}

// writeSome posts as much of p as the peer's RMB and the send buffer take
// now, waiting until some fits; 0 without an error when the connection
// moved to another link meanwhile (the caller tries again).
func (s *smcConn) writeSome(p []byte) (int, error) {
	if err := s.waitRoom(len(p)); err != nil {
		return 0, err
	}
	l, sl, err := s.linkSlot(s.wdl.wait())
	if err != nil {
		if err == errCanceled {
			return 0, os.ErrDeadlineExceeded
		}
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lnk != l || s.resending {
		l.release(sl)
		return 0, nil
	}
	if err := s.writeErrLocked(); err != nil {
		l.release(sl)
		return 0, err
	}
	k := s.roomLocked(len(p))
	if k == 0 { // gone between the wait and the lock: cannot happen, room only grows
		l.release(sl)
		return 0, nil
	}
	s.copyInLocked(p[:k])
	var inline []byte
	if k <= inlineMax {
		inline = p[:k]
	}
	var wrs [2]qp.SendWR
	nw := s.writesLocked(l, s.sent, s.sent+uint64(k), inline, wrs[:])
	blocked := uint64(len(p)) >= s.peerSpaceLocked()
	s.sent += uint64(k)
	s.bytesSent.Add(uint64(k))
	f := smcwire.CDCFields{}
	if blocked {
		// As Linux: the CDC whose data fills the peer's free space (even
		// exactly) says write blocked, so the peer sends its consumer
		// cursor once it has read more than its update limit.
		f.ProdFlags |= smcwire.CDCWriteBlocked
	}
	// A failed post took the link down: the bytes are in the send
	// buffer, and the failover writes them again on another link (or the
	// group ends, and the connection with it).
	_ = s.postCDCLocked(l, sl, &f, wrs[:nw])
	return k, nil
}

// linkSlot takes a CDC slot on the connection's link. When the link is
// down it waits for the connection to move to another (or to fail), and
// takes one there; while the connection moves, it waits until it has.
func (s *smcConn) linkSlot(cancel <-chan struct{}) (*link, *txSlot, error) {
	for {
		s.mu.Lock()
		l, moved, err, moving := s.lnk, s.moved, s.err, s.resending
		s.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
		if !moving {
			sl, err := l.slot(cancel)
			if err == nil {
				return l, sl, nil
			}
			if err == errCanceled {
				return nil, nil, err
			}
		}
		select {
		case <-moved:
		case <-s.closeDone: // failed: the next round says why
		case <-cancel:
			return nil, nil, errCanceled
		}
	}
}

// waitRoom waits until at least one byte of a write of want bytes can be
// posted, the write must fail, or the write deadline passes.
func (s *smcConn) waitRoom(want int) error {
	for {
		s.mu.Lock()
		err := s.writeErrLocked()
		k := s.roomLocked(want)
		l := s.lnk
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if k > 0 {
			return nil
		}
		s.countTxFull()
		if !s.awaitWritable(l) {
			return os.ErrDeadlineExceeded
		}
	}
}

// awaitWritable waits for room (the peer's consumer update, which the
// receive path brings: the device of the connection's link l must be
// served meanwhile, see device.BeginWait) and reports false once the
// write deadline has passed.
func (s *smcConn) awaitWritable(l *link) bool {
	if l != nil {
		l.dev.dev.BeginWait()
		defer l.dev.dev.EndWait(nil)
	}
	select {
	case <-s.writable:
		return true
	case <-s.wdl.wait():
		return false
	}
}

// writeErrLocked is why a write cannot go on, if it cannot.
func (s *smcConn) writeErrLocked() error {
	switch {
	case s.err != nil:
		return s.err
	case s.doneWriting || s.closed:
		return errClosedWrite
	case s.peerClosed:
		return errPeerClosed
	}
	return nil
}

// peerSpaceLocked is the room left in the peer's RMB.
func (s *smcConn) peerSpaceLocked() uint64 { return s.peerSize - (s.sent - s.peerCons) }

// roomLocked returns how many of want bytes can be posted now: what both
// the peer's RMB and the send buffer have room for.
func (s *smcConn) roomLocked(want int) int {
	free := uint64(len(s.snd)) - (s.sent - s.sndAcked)
	return int(min(uint64(want), s.peerSpaceLocked(), free))
}

// copyInLocked copies p into the send buffer at sent (in two pieces where
// it wraps).
func (s *smcConn) copyInLocked(p []byte) {
	size := uint64(len(s.snd))
	for pos := s.sent; len(p) > 0; {
		k := copy(s.snd[pos%size:], p)
		pos += uint64(k)
		p = p[k:]
	}
}

// writesLocked builds, for link l, the RDMA WRITEs of the bytes from pos
// to end into the peer's RMB: one, or two where the RMB wraps; each
// gathers from the send buffer (two SGEs where it wraps there) or, given
// inline (the same bytes), from that.
func (s *smcConn) writesLocked(l *link, pos, end uint64, inline []byte, wrs []qp.SendWR) int {
	n := 0
	for pos < end {
		off := pos % s.peerSize
		k := min(end-pos, s.peerSize-off)
		w := &wrs[n]
		*w = qp.SendWR{Opcode: qp.WRRDMAWrite, RemoteAddr: s.peerVA + off, RKey: s.peerRKey}
		w.WRID, w.Entry = l.writeTag()
		if inline != nil {
			w.Flags, w.Inline = qp.SendInline, inline[:k]
			inline = inline[k:]
		} else {
			w.SGL = s.gatherLocked(pos, k, s.sgl[n][:0])
		}
		pos += k
		n++
	}
	return n
}

// gatherLocked returns the SGEs of the k bytes of the send buffer from
// pos (two where the buffer wraps), in the region of the connection's
// link.
func (s *smcConn) gatherLocked(pos, k uint64, sgl []qp.SGE) []qp.SGE {
	size := uint64(len(s.snd))
	for k > 0 {
		off := pos % size
		n := min(k, size-off)
		sgl = append(sgl, qp.SGE{Addr: s.sndVA + off, Length: uint32(n), LKey: s.sndLKey})
		pos += n
		k -= n
	}
	return sgl
}

// readFrom copies r into the connection until EOF (io.ReaderFrom): it
// reads into a buffer of the send buffer's size and posts it as Write
// would, so that a large copy moves in RMB-sized pieces.
func (s *smcConn) readFrom(r io.Reader) (int64, error) {
	buf := make([]byte, len(s.snd))
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := s.write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
