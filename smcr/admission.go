package smcr

import (
	"net"
	"net/netip"
	"sync"
)

// Handshake admission: which of the TCP connections a listener accepted
// run their handshake now. A handshake holds a goroutine for up to a few
// CLC waits, and from the Proposal on a link group's buffers; a peer that
// opens connections and says nothing, or half a message, or stalls after
// its Proposal, would otherwise take every handshake a listener runs, and
// a real client waits behind them until its own CLC wait expires (a Linux
// listener has the same exposure: its backlog of 6-second waits). So:
//
//   - at most Config.MaxPendingHandshakes run at once, and of those at
//     most Config.MaxHandshakesPerSource for one source (the peer's IP
//     address);
//   - a connection beyond either limit waits, without a goroutine, in its
//     source's queue; each handshake that ends starts the next waiting
//     connection, taking the sources in turn, so that a source that floods
//     waits behind its own connections, not others' behind its;
//   - at most 4 × MaxPendingHandshakes wait: past that, the oldest waiting
//     connection of the source with the most waiting is closed (a flood's
//     own, never a quiet source's while a flooder has more);
//   - the Proposal must arrive whole within Config.ProposalTimeout of the
//     handshake's start (a client sends it at once): a silent or
//     trickling connection is dropped quickly, as a SYN-flood defence
//     drops half-open ones.
//
// The accept loop never waits for any of this, so the kernel's backlog
// never fills with connections it has not looked at.
type admission struct {
	maxRunning, perSource, maxWaiting int

	mu      sync.Mutex
	running int
	waiting int
	sources map[netip.Addr]*source // those with connections running or waiting
	turns   []*source              // those with connections waiting, in turn order
	closed  bool
}

// source is one peer address's share of a listener's handshakes.
type source struct {
	addr    netip.Addr
	running int
	waiting []*net.TCPConn // oldest first
}

func newAdmission(cfg *Config) *admission {
	return &admission{maxRunning: cfg.MaxPendingHandshakes, perSource: cfg.MaxHandshakesPerSource,
		maxWaiting: 4 * cfg.MaxPendingHandshakes, sources: map[netip.Addr]*source{}}
}

// admit takes a newly accepted connection: run says to start its
// handshake now (it counts as running until done); otherwise it waits.
// drop, if not nil, is a waiting connection to close: the one over the
// limit (tc itself once the listener is closed).
func (a *admission) admit(tc *net.TCPConn) (run bool, drop *net.TCPConn) {
	addr := addrPort(tc.RemoteAddr()).Addr()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false, tc
	}
	src := a.sources[addr]
	if src == nil {
		src = &source{addr: addr}
		a.sources[addr] = src
	}
	if len(src.waiting) == 0 && src.running < a.perSource && a.running < a.maxRunning {
		src.running++
		a.running++
		return true, nil
	}
	if len(src.waiting) == 0 {
		a.turns = append(a.turns, src)
	}
	src.waiting = append(src.waiting, tc)
	a.waiting++
	if a.waiting > a.maxWaiting {
		return false, a.dropLocked()
	}
	return false, nil
}

// dropLocked takes the oldest waiting connection of the source with the
// most waiting.
func (a *admission) dropLocked() *net.TCPConn {
	var worst *source
	for _, s := range a.turns {
		if worst == nil || len(s.waiting) > len(worst.waiting) {
			worst = s
		}
	}
	return a.popLocked(worst)
}

// popLocked takes s's oldest waiting connection.
func (a *admission) popLocked(s *source) *net.TCPConn {
	tc := s.waiting[0]
	s.waiting[0] = nil
	s.waiting = s.waiting[1:]
	a.waiting--
	for i, t := range a.turns {
		if t == s {
			// To the back of the line, or out of it.
			a.turns = append(a.turns[:i], a.turns[i+1:]...)
			if len(s.waiting) > 0 {
				a.turns = append(a.turns, s)
			}
			break
		}
	}
	a.forgetLocked(s)
	return tc
}

// done ends a running handshake of a connection from addr and returns the
// waiting connection whose handshake runs next, if any.
func (a *admission) done(addr netip.Addr) *net.TCPConn {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running--
	if src := a.sources[addr]; src != nil {
		src.running--
		a.forgetLocked(src)
	}
	if a.closed {
		return nil
	}
	for _, s := range a.turns {
		if s.running < a.perSource {
			s.running++
			a.running++
			return a.popLocked(s)
		}
	}
	return nil
}

// forgetLocked drops a source that has nothing running or waiting.
func (a *admission) forgetLocked(s *source) {
	if s.running == 0 && len(s.waiting) == 0 {
		delete(a.sources, s.addr)
	}
}

// close admits nothing more and returns the waiting connections (to close).
func (a *admission) close() []*net.TCPConn {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	var all []*net.TCPConn
	for _, s := range a.turns {
		all = append(all, s.waiting...)
		s.waiting = nil
		a.forgetLocked(s)
	}
	a.turns, a.waiting = nil, 0
	return all
}
