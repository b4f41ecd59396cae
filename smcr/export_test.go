package smcr

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/goroce/goroce/smcr/smcwire"
)

// DropConfirmLinks makes the client link groups cfg creates drop the first
// n CONFIRM_LINK requests they receive.
func DropConfirmLinks(cfg *Config, n int32) { cfg.hooks.dropConfirmLinks = n }

// FastLinkChecks makes the link groups cfg creates give up on a TEST_LINK
// after wait, and add a lost link again every relink.
func FastLinkChecks(cfg *Config, wait, relink time.Duration) {
	cfg.hooks.testLinkWait, cfg.hooks.relinkInterval = wait, relink
}

// OrderFailover has the link groups cfg creates call hold before they
// move a failed link's connections, and answered after they answered a
// TEST_LINK.
func OrderFailover(cfg *Config, hold, answered func()) {
	cfg.hooks.holdFailover, cfg.hooks.testLinkAnswered = hold, answered
}

// AddressesGone makes the devices cfg's stacks open take assigned for
// the look at the host's interfaces, and look again hold after a send
// failed for want of their address (and every hold until it is back).
func AddressesGone(cfg *Config, assigned func(netip.Addr) bool, hold time.Duration) {
	cfg.hooks.addrAssigned, cfg.hooks.deviceDownHold = assigned, hold
}

// StackStats are a stack's counters of bad peer input, for tests.
type StackStats struct {
	BadCDC, BadLLC, UnknownToken, StaleCDC, CDCViolation uint64
	RKeysDeleted, RKeysUnconfirmed                       uint64
	TCPBytes                                             uint64
	LinksAdded, LinksFailed, ConnsMoved, LLCDropped      uint64
}

// StatsOf returns the counters of the stack a connection uses.
func StatsOf(c *Conn) StackStats { return StatsFunc(c)() }

// StatsFunc returns a function that reads the counters of the stack a
// connection uses, also after the connection and the stack closed.
func StatsFunc(c *Conn) func() StackStats {
	s := &c.smc.g.st.stats
	return func() StackStats {
		return StackStats{s.badCDC.Load(), s.badLLC.Load(), s.unknownToken.Load(), s.staleCDC.Load(), s.cdcViolation.Load(),
			s.rkeysDeleted.Load(), s.rkeysUnconfirmed.Load(), s.tcpBytes.Load(),
			s.linksAdded.Load(), s.linksFailed.Load(), s.connsMoved.Load(), s.llcDropped.Load()}
	}
}

// OpenStacks returns how many stacks and devices the process has open.
func OpenStacks() int {
	stacks.Lock()
	n := len(stacks.m)
	stacks.Unlock()
	devices.Lock()
	defer devices.Unlock()
	return n + len(devices.m)
}

// Pending returns the bytes that have arrived on an SMC-R connection and
// are not read yet.
func Pending(c net.Conn) int {
	sc, ok := c.(*Conn)
	if !ok || sc.smc == nil {
		return 0
	}
	sc.smc.mu.Lock()
	defer sc.smc.mu.Unlock()
	return int(sc.smc.produced - sc.smc.consumed)
}

// HoldCDCSlots takes every CDC send slot of the link a connection uses (as
// writers on a busy link hold them) until release is called. Tests only.
func HoldCDCSlots(c net.Conn) (release func()) {
	l := c.(*Conn).smc.link()
	held := make([]*txSlot, 0, txSlots)
	for range txSlots {
		s, err := l.slot(nil)
		if err != nil {
			break
		}
		held = append(held, s)
	}
	return func() {
		for _, s := range held {
			l.release(s)
		}
	}
}

// PeerIDOf returns the SMC peer ID of the stack a connection uses.
func PeerIDOf(c net.Conn) smcwire.PeerID { return c.(*Conn).st.peerID }

// TCPOf returns the TCP connection under a connection.
func TCPOf(c net.Conn) *net.TCPConn { return c.(*Conn).tcp }

// LinkDown reports whether the link a connection sends on is down, or
// its group has no link left.
func LinkDown(c net.Conn) bool {
	s := c.(*Conn).smc
	return s.g.dead.Load() || s.link().down.Load()
}

// AddingLink reports whether an ADD_LINK flow of c's group runs or waits.
func AddingLink(c net.Conn) bool {
	g := c.(*Conn).smc.g
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.remote > 0
}

// SendBufferState reports whether a connection's release has dealt with
// its send buffer (deregistered it, or left it to its last CDC's
// completion), and whether the buffer is registered on its link.
func SendBufferState(c net.Conn) (released, valid bool) {
	sc := c.(*Conn).smc
	sc.mu.Lock()
	freed, later, l := sc.freed, sc.sndLater, sc.lnk
	sc.mu.Unlock()
	sc.g.mu.Lock()
	mr := sc.sndBuf.mrs[l.idx]
	valid = mr != nil && mr.Valid()
	sc.g.mu.Unlock()
	return freed && (later || !valid), valid
}

// DebugState describes an SMC-R connection's cursors and flags (for a
// test's report of a hang).
func DebugState(c net.Conn) string {
	s := c.(*Conn).smc
	s.mu.Lock()
	defer s.mu.Unlock()
	id := func(l *link) int {
		if l == nil {
			return -1
		}
		return int(l.id)
	}
	return fmt.Sprintf("lnk=%d rx=%d sent=%d sndAcked=%d seqFin=%d peerCons=%d produced=%d consumed=%d handed=%d announced=%d txSeq=%d rxSeq=%d rxHistN=%d rewound=%v resending=%v posted=%d doneW=%v closed=%v peerDoneW=%v peerClosed=%v err=%v freed=%v",
		id(s.lnk), id(s.rxLink), s.sent, s.sndAcked, s.seqFin, s.peerCons, s.produced, s.consumed, s.handed, s.announced,
		s.txSeq, s.rxSeq, s.rxHistN, s.rewound, s.resending, s.posted, s.doneWriting, s.closed, s.peerDoneWriting, s.peerClosed, s.err, s.freed)
}
