package smcr

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// An SMC-R connection keeps its TCP connection for its whole life, as
// Linux keeps the CLC socket, and watches it: after the handshake nothing
// travels there until the SMC close is done (the close has its own CDC
// flags, and the TCP connection follows them), so whatever happens on it
// tells of the peer. A Linux peer that dies has its kernel close its SMC
// sockets properly; a goroce peer's SMC-R dies with its process, and only
// its kernel's closing of its TCP sockets is left to say so, at once,
// where a link group's TEST_LINK would take up to its interval and two
// seconds more. So:
//
//   - for its SMC-R life a connection's TCP socket has SO_LINGER 0 (an
//     orderly close puts the default back first): the kernel closing a
//     killed process's socket resets the connection;
//   - a reset (or any error) before the peer's SMC close aborts the
//     connection at once, as the peer's peer_conn_abort would;
//   - the end of the stream (a FIN) before the peer's SMC close may have
//     overtaken the close's CDC, which takes another path: a TEST_LINK
//     settles it, since the peer answers after sending the CDC, on the same
//     RC queue pair, and so the CDC has been applied when the answer is in.
//     If the close still has not come, the connection is aborted; a peer
//     that does not answer takes the link, and so the group, down;
//   - bytes mean the peer no longer speaks SMC-R on this connection (it fell
//     back, or is hostile): aborted at once, and counted.
//
// Only the connection whose TCP connection went away ends: its group may
// carry others' (a Linux peer's, of other processes). After the peer's own
// CloseWrite the stream has ended, and a later reset cannot be seen: the
// death of a peer that shut down writing is left to TEST_LINK.

var (
	errPeerReset    = &errnoError{"smcr: connection reset: the peer's TCP connection was reset before it closed SMC-R (its process ended?)", syscall.ECONNRESET}
	errPeerTCPEnded = &errnoError{"smcr: connection reset: the peer closed its TCP connection without closing SMC-R", syscall.ECONNRESET}
	errPeerTCPBytes = &errnoError{"smcr: connection reset: the peer sent bytes on the TCP connection after the SMC-R handshake (it does not use SMC-R for this connection)", syscall.ECONNRESET}
)

// watchTCP makes the connection's TCP socket reset when this process
// ends and starts the goroutine that watches it; the goroutine ends when
// the TCP connection is closed.
func (c *Conn) watchTCP() {
	_ = c.tcp.SetLinger(0)
	go c.watch()
}

func (c *Conn) watch() {
	var b [1]byte
	n, err := c.tcp.Read(b[:])
	s := c.smc
	switch {
	case n > 0:
		s.g.st.count(&s.g.st.stats.tcpBytes)
		s.peerGone(errPeerTCPBytes, false)
	case errors.Is(err, net.ErrClosed):
		// Closed here: the connection has ended.
	case err == io.EOF:
		s.mu.Lock()
		done := s.peerClosed || s.peerAborted || s.peerDoneWriting || s.freed
		s.mu.Unlock()
		if !done {
			s.g.checkPeer(s)
		}
	default:
		s.peerGone(fmt.Errorf("%w (%v)", errPeerReset, err), false)
	}
}

// peerGone aborts the connection because its peer's TCP connection went
// away before the peer's SMC close (afterCheck: the stream's end, which a
// CloseWrite of the peer's explains too). Reads fail with err once what
// arrived is read, writes at once, and a Close ends the connection without
// waiting for the peer; one that was closed already ends now.
func (s *smcConn) peerGone(err error, afterCheck bool) {
	s.mu.Lock()
	if s.freed || s.peerClosed || s.peerAborted || (afterCheck && s.peerDoneWriting) {
		s.mu.Unlock()
		return
	}
	s.peerAborted, s.peerAbortErr = true, err
	s.failLocked(err)
	end := s.closed
	s.mu.Unlock()
	if end {
		s.finish()
	}
}

// checkPeer runs a TEST_LINK for s, whose TCP connection ended without
// the peer's SMC close, and aborts s if the close has not come by its
// answer. One flow serves every connection that asks while it runs.
func (g *linkGroup) checkPeer(s *smcConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ending {
		return // its connections are aborted anyway
	}
	g.toCheck = append(g.toCheck, s)
	if !g.checking {
		g.checking = true
		g.spawn(g.checker)
	}
}

// checker runs the TEST_LINK flows of checkPeer: one on each link the
// peers of the connections asking send on (the link their last CDC came
// on: the peer's close CDC, posted before its FIN, comes there). The
// answer settles it only while that link is up and the peer is not
// moving the connection: with two links the peer may have posted its
// close on a link that has failed since, and it sends it again on
// another after a failover validation, which can come after the answer.
// Such a connection is checked again once the peer's side has moved (or
// after another TEST_LINK's time, which finds a dead peer: its links fail,
// and the group ends). A link that does not answer goes down.
func (g *linkGroup) checker() {
	for {
		g.mu.Lock()
		batch := g.toCheck
		g.toCheck = nil
		if len(batch) == 0 {
			g.checking = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		tested := map[*link]error{}
		for _, s := range batch {
			l, settled, moved := s.peerLink()
			if !settled {
				// Nothing to settle yet; a TEST_LINK on our own link
				// still finds a dead peer.
				l = s.link()
			}
			err, done := tested[l]
			if !done {
				err = g.testLinkFlow(l)
				tested[l] = err
				if err != nil && !errors.Is(err, errGroupEnding) {
					l.fail(fmt.Errorf("smcr: TEST_LINK after a peer's TCP connection ended: %w", err))
				}
			}
			switch {
			case errors.Is(err, errGroupEnding):
				return // the group ends, and its connections with it
			case err != nil || !settled:
				g.recheck(s, moved)
			default:
				if now, still, moved := s.peerLink(); now != l || !still {
					g.recheck(s, moved) // the peer began to move it meanwhile
					continue
				}
				s.peerGone(errPeerTCPEnded, true)
			}
		}
	}
}

// peerLink returns the link the peer of s sends on (where its last CDC
// came, or s's own before any came), whether a TEST_LINK answer there
// would settle whether its close is still to come (the link is up, and
// the peer is not moving the connection), and the channel closed when
// that changes.
func (s *smcConn) peerLink() (l *link, settled bool, moved <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l = s.rxLink
	if l == nil {
		l = s.lnk
	}
	return l, !s.peerMoving && !l.down.Load(), s.rxMoved
}

// recheck checks s again once its peer's side moved (moved closes), or
// after a TEST_LINK's time.
func (g *linkGroup) recheck(s *smcConn, moved <-chan struct{}) {
	g.spawn(func() {
		t := time.NewTimer(g.testLinkWait())
		defer t.Stop()
		select {
		case <-moved:
		case <-t.C:
		case <-s.closeDone:
			return
		case <-g.closing:
			return
		}
		s.mu.Lock()
		done := s.peerClosed || s.peerAborted || s.peerDoneWriting || s.freed
		s.mu.Unlock()
		if !done {
			g.checkPeer(s)
		}
	})
}
