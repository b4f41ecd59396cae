package smcr

import (
	"io"
	"os"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/smcr/smcwire"
)

// The send path: Write returns once every byte it was given is posted (an
// RDMA WRITE into the peer's RMB, then a CDC announcing it), waiting for
// room in the peer's RMB as TCP waits for room in its send window. A small
// write is posted inline (the QP copies it into the work request); a larger
// one is copied into the send buffer, which the WRITE then gathers from and
// which stays in use until its CDC completes (a retransmission rebuilds
// the WRITE from it). The WRITEs and the CDC leave in one post, and so in
// one system call.

// inlineMax is the largest write sent inline: a CDC's WRITE of a small
// message needs no send buffer at all.
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
// now, waiting until some fits.
func (s *smcConn) writeSome(p []byte) (int, error) {
	if err := s.waitRoom(len(p)); err != nil {
		return 0, err
	}
	sl, err := s.g.lnk.slot(s.wdl.wait())
	if err != nil {
		if err == errCanceled {
			return 0, os.ErrDeadlineExceeded
		}
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writeErrLocked(); err != nil {
		s.g.lnk.release(sl)
		return 0, err
	}
	k, inline := s.roomLocked(len(p))
	if k == 0 { // gone between the wait and the lock: cannot happen, room only grows
		s.g.lnk.release(sl)
		return 0, nil
	}
	var wrs [2]qp.SendWR
	nw := s.buildWritesLocked(p[:k], inline, wrs[:])
	sl.ackTo = s.sndAcked
	if !inline {
		sl.ackTo = s.sndHead
	}
	f := smcwire.CDCFields{}
	if uint64(len(p)) >= s.peerSpaceLocked()+uint64(k) {
		// As Linux: the CDC whose data fills the peer's free space (even
		// exactly) says write blocked, so the peer sends its consumer
		// cursor once it has read more than its update limit.
		f.ProdFlags |= smcwire.CDCWriteBlocked
	}
	if err := s.postCDCLocked(sl, &f, wrs[:nw]); err != nil {
		return 0, err
	}
	s.bytesSent.Add(uint64(k))
	return k, nil
}

// waitRoom waits until at least one byte of a write of want bytes can be
// posted, the write must fail, or the write deadline passes.
func (s *smcConn) waitRoom(want int) error {
	for {
		s.mu.Lock()
		err := s.writeErrLocked()
		k, _ := s.roomLocked(want)
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if k > 0 {
			return nil
		}
		s.countTxFull()
		select {
		case <-s.writable:
		case <-s.wdl.wait():
			return os.ErrDeadlineExceeded
		}
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

// roomLocked returns how many of want bytes can be posted now, and whether
// they go inline.
func (s *smcConn) roomLocked(want int) (int, bool) {
	k := min(uint64(want), s.peerSpaceLocked())
	if k == 0 {
		return 0, false
	}
	if k <= inlineMax {
		return int(k), true
	}
	free := uint64(len(s.snd)) - (s.sndHead - s.sndAcked)
	k = min(k, free)
	if k == 0 && want <= inlineMax {
		return 0, false
	}
	return int(k), false
}

// buildWritesLocked builds the RDMA WRITEs of p at the producer cursor: one,
// or two where the peer's RMB wraps; each gathers from the send buffer
// (two SGEs where it wraps there) or, inline, from p. It advances sent and,
// through the send buffer, sndHead.
func (s *smcConn) buildWritesLocked(p []byte, inline bool, wrs []qp.SendWR) int {
	n := 0
	for len(p) > 0 {
		off := s.sent % s.peerSize
		k := min(uint64(len(p)), s.peerSize-off)
		w := &wrs[n]
		*w = qp.SendWR{Opcode: qp.WRRDMAWrite, RemoteAddr: s.peerVA + off, RKey: s.peerRKey}
		w.WRID, w.Entry = s.g.lnk.writeTag()
		if inline {
			w.Flags, w.Inline = qp.SendInline, p[:k]
		} else {
			w.SGL = s.copyToSendBufLocked(p[:k], s.sgl[n][:0])
		}
		s.sent += k
		p = p[k:]
		n++
	}
	return n
}

// copyToSendBufLocked copies p into the send buffer at its head and
// returns the SGEs that gather it (two where the buffer wraps).
func (s *smcConn) copyToSendBufLocked(p []byte, sgl []qp.SGE) []qp.SGE {
	size := uint64(len(s.snd))
	for len(p) > 0 {
		off := s.sndHead % size
		k := copy(s.snd[off:], p)
		sgl = append(sgl, qp.SGE{Addr: s.sndMR.VA() + off, Length: uint32(k), LKey: s.sndMR.LKey()})
		s.sndHead += uint64(k)
		p = p[k:]
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
