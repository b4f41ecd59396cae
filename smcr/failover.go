package smcr

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/smcr/smcwire"
)

// Failover (Linux's smc_switch_conns and smc_switch_cursor). The
// connections of a link that went down move to a surviving link, each
// under its lock (no Write posts while it moves):
//
//   - what the peer confirmed stays confirmed: the send buffer is free up
//     to the last CDC whose SEND completed (sndAcked: its WRITEs landed,
//     since RC completes in order), or further where the peer's consumer
//     cursor says it read further;
//   - a CDC with the failover-validation flag tells the peer, on the new
//     link, the sequence number of that last completed CDC: the peer
//     takes back what its later CDCs announced (validateLocked), and
//     stops the old link on its side (onCDC);
//   - once every moving connection's validation is posted, a TEST_LINK
//     on the new link (barrier): its answer comes after the peer handled
//     them, so that no WRITE of the old link still under way there lands
//     beside the new ones;
//   - the bytes past that point are written again from the send buffer
//     (they all stay there until their CDC completes: a small write sent
//     inline is copied there too), at the same places of the peer's RMB,
//     and a CDC with the next sequence number announces them with the
//     cursors and the close flags. A byte that had arrived before is
//     written over with itself, and its cursor was announced already or
//     is announced now: none is lost, none is read twice.
//
// The old queue pair is in the error state first (switchAway), so
// nothing it still had queued lands in the peer's RMB after the new
// writes. A connection still in its handshake (its peer's RMB unknown)
// moves when the handshake ends (follow).

// switchConns moves every connection on from to another link and
// returns it; nil when no link is left (the group ends). A target that
// fails while the connections move gives way to the next.
func (g *linkGroup) switchConns(from *link) *link {
	if h := g.hooks.holdFailover; h != nil {
		h()
	}
	for {
		to := g.failoverLink(from)
		if to == nil {
			return nil
		}
		err := g.moveAll(from, to)
		if err == nil {
			return to
		}
		if errors.Is(err, errGroupEnding) {
			return nil
		}
	}
}

// failoverLink chooses where from's connections go: an active link, on
// another device of this side if there is one (Linux skips links of the
// same device when the device failed).
func (g *linkGroup) failoverLink(from *link) *link {
	g.mu.Lock()
	defer g.mu.Unlock()
	var same *link
	for _, l := range g.links {
		if l == nil || l == from || !l.active() {
			continue
		}
		if l.dev != from.dev {
			return l
		}
		if same == nil {
			same = l
		}
	}
	return same
}

// moveAll moves the connections on from to to.
func (g *linkGroup) moveAll(from, to *link) error { return g.moveConns(from, to, g.connList()) }

// moveConns moves those of cs that are on from to to, in two phases: each
// one's validation first (nothing else is sent for it meanwhile), then a
// TEST_LINK whose answer says that the peer has handled them, then each
// one's bytes again. The peer's answer comes after it handled the
// validations (its completions run in order), and so after it stopped the
// old link (onValidation): no WRITE of the old link lands beside the new
// ones. An error says to failed meanwhile (the connections are then to's
// to move).
func (g *linkGroup) moveConns(from, to *link, cs []*smcConn) error {
	var moving []*smcConn
	var err error
	for _, c := range cs {
		var begun bool
		if begun, err = c.beginSwitch(from, to); err != nil {
			break
		}
		if begun {
			moving = append(moving, c)
		}
	}
	if err == nil && len(moving) > 0 {
		// A barrier that times out only costs the ordering: the bytes
		// are right either way. A dead link is to's failure.
		if berr := g.barrier(to); berr != nil && (to.down.Load() || errors.Is(berr, errGroupEnding)) {
			err = errOr(errLinkDown, g)
		}
	}
	for _, c := range moving {
		if ferr := c.finishSwitch(to, err == nil); ferr != nil && err == nil {
			err = ferr
		}
	}
	return err
}

// barrier sends a TEST_LINK on l tagged as a failover's and waits for the
// peer's answer to it (Linux answers every TEST_LINK with the request's
// own bytes).
func (g *linkGroup) barrier(l *link) error {
	l.barrierMu.Lock()
	defer l.barrierMu.Unlock()
	tag := l.barrierTag.Add(1)
	var f smcwire.TestLinkFields
	binary.BigEndian.PutUint64(f.UserData[:8], tag)
	copy(f.UserData[8:], barrierMark)
	ctx, cancel := context.WithTimeout(context.Background(), max(g.testLinkWait(), llcWait))
	defer cancel()
	if err := l.sendLLC(smcwire.AppendTestLink(nil, g.v2, 0, &f), ctx.Done(), g.closing); err != nil {
		return errOr(err, g)
	}
	for {
		select {
		case got := <-l.barrierResp:
			if got >= tag {
				return nil
			}
		case <-l.dead:
			return l.downErr
		case <-g.closing:
			return errGroupEnding
		case <-ctx.Done():
			return fmt.Errorf("smcr: the TEST_LINK after a failover on link %d: %w", l.id, errLLCTimeout)
		}
	}
}

// barrierMark is the second half of a barrier TEST_LINK's user data.
const barrierMark = "failover"

// barrierAnswered takes the answer to a TEST_LINK (on the receive
// goroutine): a barrier's goes to the barrier, keeping the latest.
func (l *link) barrierAnswered(m smcwire.TestLink) bool {
	if len(m) < 20 {
		return false
	}
	d := m.UserData()
	if string(d[8:]) != barrierMark {
		return false
	}
	tag := binary.BigEndian.Uint64(d[:8])
	for {
		select {
		case l.barrierResp <- tag:
			return true
		default:
			select {
			case <-l.barrierResp:
			default:
			}
		}
	}
}

// follow moves a connection that ends its handshake on a link that went
// down meanwhile (the group moved the others while its peer's RMB was
// still unknown).
func (s *smcConn) follow() {
	s.mu.Lock()
	l := s.lnk
	s.mu.Unlock()
	if !l.down.Load() {
		return
	}
	for {
		to := s.g.failoverLink(l)
		if to == nil {
			return // the group ends, and the connection with it
		}
		if err := s.g.moveConns(l, to, []*smcConn{s}); err == nil || errors.Is(err, errGroupEnding) {
			return
		}
	}
}

// setLink makes l the connection's link, with the send buffer's region
// there. mu is held, or the connection is not shared yet.
func (s *smcConn) setLink(l *link) {
	if s.lnk != nil {
		s.lnk.conns.Add(-1)
	}
	s.lnk = l
	l.conns.Add(1)
	if mr := s.sndBuf.mrs[l.idx]; mr != nil {
		s.sndVA, s.sndLKey = mr.VA(), mr.LKey()
	}
	s.broadcastMoveLocked()
}

// beginSwitch moves the connection from from to to, if it is on from, and
// posts its validation there (see the top of this file); begun says that
// it did, and the connection waits for finishSwitch. An error says to
// failed meanwhile.
func (s *smcConn) beginSwitch(from, to *link) (begun bool, err error) {
	s.mu.Lock()
	on := s.lnk == from && s.attached && !s.freed
	rt := s.rtIdx
	s.mu.Unlock()
	if !on {
		return false, nil
	}
	// The slot before the lock: a Write may hold slots while it waits for
	// the lock.
	v, err := to.slot(s.g.closing)
	if err != nil {
		return false, errOr(err, s.g)
	}
	peer, known := s.g.rtokenOn(rt, to.idx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lnk != from {
		to.release(v)
		return false, nil
	}
	s.setLink(to)
	s.g.st.count(&s.g.st.stats.connsMoved)
	wake(s.writable)
	switch {
	case s.freed || s.err != nil:
		to.release(v)
		return false, nil
	case !known:
		// The peer never gave its RMB's rkey on that link: the
		// connection cannot go on there.
		s.violationLocked(fmt.Errorf("no rkey of the peer's RMB on link %d", to.id))
		to.release(v)
		return false, nil
	}
	s.peerRKey, s.peerVA = peer.rkey, peer.va
	// The validation first, alone: nothing else is sent until
	// finishSwitch.
	s.resending = true
	var w [1]qp.SendWR
	vf := smcwire.CDCFields{Seq: s.seqFin, Token: s.peerTok, ProdFlags: smcwire.CDCFailoverValidate}
	to.buildSend(&w[0], v, smcwire.AppendCDC(v.cdc[:0], &vf))
	if err := to.post(v, w[:]); err != nil {
		s.resending = false
		s.broadcastMoveLocked()
		return false, errOr(errLinkDown, s.g)
	}
	return true, nil
}

// finishSwitch ends a move beginSwitch began: with resend, the bytes past
// the confirmed point go again on to; without (to failed), the connection
// is left for to's failover.
func (s *smcConn) finishSwitch(to *link, resend bool) error {
	var d *txSlot
	if resend {
		var err error
		if d, err = to.slot(s.g.closing); err != nil {
			resend = false
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resending = false
	s.broadcastMoveLocked()
	if !resend || s.lnk != to || s.freed || s.err != nil {
		if d != nil {
			to.release(d)
		}
		return nil
	}
	if s.peerCons > s.sndAcked {
		s.sndAcked = s.peerCons // read by the peer: confirmed, whatever became of its CDC
		wake(s.writable)        // room in the send buffer: a Write may wait for it
	}
	return s.resendLocked(to, d)
}

// broadcastMoveLocked wakes whoever waits for the connection to move (or
// to finish moving). mu is held.
func (s *smcConn) broadcastMoveLocked() {
	close(s.moved)
	s.moved = make(chan struct{})
}

// errOr is err, or errGroupEnding once the group ends.
func errOr(err error, g *linkGroup) error {
	select {
	case <-g.closing:
		return errGroupEnding
	default:
		return err
	}
}

// resendLocked posts, on link l in one post, the WRITEs of everything
// past the confirmed point and the CDC that announces them, with the
// cursors and close flags (in slot d). mu is held.
func (s *smcConn) resendLocked(l *link, d *txSlot) error {
	var wrs [3]qp.SendWR
	n := s.writesLocked(l, s.sndAcked, s.sent, nil, wrs[:2])
	var f smcwire.CDCFields
	return s.postCDCLocked(l, d, &f, wrs[:n])
}

// validateLocked takes a failover validation from the peer (Linux's
// smc_cdc_msg_validate): it names the last of the peer's CDCs whose SEND
// completed. What CDCs after it announced is taken back: the peer writes
// those bytes again and announces them anew, and until then nothing here
// reads where its WRITEs land (the bytes are the same, but a Read must not
// copy memory a WRITE writes). mu is held.
//
// Linux aborts the connection when the CDC named was never received. Here
// that CDC may merely not be handled yet: its link's completions run on
// its own device's goroutine, which can be behind the surviving link's
// (the peer saw the CDC's ACK, so it did arrive). Nothing after it was
// handled either, so there is nothing to take back; the CDC is applied
// when its turn comes, or dropped as stale after the peer's next, whose
// cursors include it.
func (s *smcConn) validateLocked(seq uint16) {
	if !s.rxSeen || int16(s.rxSeq-seq) < 0 {
		return
	}
	fin, ok := uint64(0), seq == 0 && s.rxHistN < 1<<16 // 0: none completed yet
	for k := 1; !ok && k <= min(s.rxHistN, rxHistLen); k++ {
		if m := s.rxHist[(s.rxHistN-k)%rxHistLen]; m.seq == seq {
			fin, ok = m.produced, true
		}
	}
	if p := max(fin, s.consumed+s.handed); ok && p < s.produced {
		// Its close flags, if they came meanwhile, come again too: no
		// end of stream before the bytes.
		s.produced, s.prodC, s.rewound = p, cursorOf(p, uint64(len(s.rmb))), true
	}
}
