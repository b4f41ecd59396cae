package smcr

import (
	"net"

	"github.com/goroce/goroce/smcr/smcwire"
)

// DropConfirmLinks makes the client link groups cfg creates drop the first
// n CONFIRM_LINK requests they receive.
func DropConfirmLinks(cfg *Config, n int32) { cfg.hooks.dropConfirmLinks = n }

// StackStats are a stack's counters of bad peer input, for tests.
type StackStats struct {
	BadCDC, BadLLC, UnknownToken, StaleCDC, CDCViolation uint64
	RKeysDeleted, RKeysUnconfirmed                       uint64
	TCPBytes                                             uint64
}

// StatsOf returns the counters of the stack a connection uses.
func StatsOf(c *Conn) StackStats { return StatsFunc(c)() }

// StatsFunc returns a function that reads the counters of the stack a
// connection uses, also after the connection and the stack closed.
func StatsFunc(c *Conn) func() StackStats {
	s := &c.smc.g.st.stats
	return func() StackStats {
		return StackStats{s.badCDC.Load(), s.badLLC.Load(), s.unknownToken.Load(), s.staleCDC.Load(), s.cdcViolation.Load(),
			s.rkeysDeleted.Load(), s.rkeysUnconfirmed.Load(), s.tcpBytes.Load()}
	}
}

// OpenStacks returns how many stacks (devices) the process has open.
func OpenStacks() int {
	stacks.Lock()
	defer stacks.Unlock()
	return len(stacks.m)
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
	l := c.(*Conn).smc.g.lnk
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

// LinkDown reports whether the link of a connection's group is down.
func LinkDown(c net.Conn) bool { return c.(*Conn).smc.g.lnk.down.Load() }

// SendBufferState reports whether a connection's release has dealt with
// its send buffer (deregistered it, or left it to its last CDC's
// completion), and whether the buffer is registered.
func SendBufferState(c net.Conn) (released, valid bool) {
	sc := c.(*Conn).smc
	sc.mu.Lock()
	defer sc.mu.Unlock()
	valid = sc.sndMR.Valid()
	return sc.freed && (sc.sndLater || !valid), valid
}
