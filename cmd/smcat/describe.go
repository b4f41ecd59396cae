package main

import (
	"fmt"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// describe says what a connection became (-v): its mode and signalling,
// and for SMC-R its link group, link and buffers; for a fallback the
// reason as Linux's decline code, and what to do about it when smcat can
// tell.
func describe(c *smcr.Conn, what string) []string {
	return describeInfo(c.Info(), what)
}

func describeInfo(i smcr.ConnInfo, what string) []string {
	sig := signallingText(i.Signalling, true)
	if i.Mode == smcr.ModeFallback {
		l := fmt.Sprintf("%s: TCP fallback, reason %v, decided by %s (%s)", what, i.Fallback, fallbackBy(i.FallbackBy), sig)
		if i.FallbackBy == "peer" && i.PeerDiagnosis != 0 {
			l += fmt.Sprintf(": the peer declined with %v", i.PeerDiagnosis)
		}
		ls := []string{l}
		if h := fallbackHint(i); h != "" {
			ls = append(ls, "  "+h)
		}
		return ls
	}
	first := ""
	if i.FirstContact {
		first = ", first contact"
	}
	ls := []string{fmt.Sprintf("%s: %v (%s)", what, i.Mode, sig)}
	grp := fmt.Sprintf("  link group 0x%08x%s", i.LinkGroup, first)
	if i.EID != "" {
		grp += fmt.Sprintf(", EID %q", i.EID)
	}
	if i.PeerHost != "" {
		grp += fmt.Sprintf(", peer host %q", i.PeerHost)
	}
	if i.LinkGroupType != "" {
		grp += ", " + i.LinkGroupType
	}
	ls = append(ls, grp)
	for _, l := range i.Links {
		ls = append(ls, "  "+linkText(l))
	}
	ls = append(ls, fmt.Sprintf("  RMB %s (peer's %s), send buffer %s, token %#x (peer's %#x)",
		sizeText(i.LocalRMBSize), sizeText(i.PeerRMBSize), sizeText(i.SendBufSize), i.Token, i.PeerToken))
	return ls
}

// linkText is one link as -v prints it.
func linkText(l smcr.LinkInfo) string {
	t := fmt.Sprintf("link %d: GID %v QPN %#06x <-> peer GID %v QPN %#06x, MTU %d, %s",
		l.ID, l.LocalGID, l.LocalQPN, l.PeerGID, l.PeerQPN, l.MTU, l.State)
	if l.Path != "" {
		w := pathWords[l.Path]
		if w == "" {
			w = l.Path
		}
		t += ", over " + w
	}
	if l.Asymmetric {
		t += ", asymmetric"
	}
	if l.InUse {
		t += ", this connection's"
	}
	return t
}

// describeLink says what became of a link (-v, as it happens).
func describeLink(e smcr.LinkEvent) []string {
	what := "up"
	if !e.Up {
		what = "down"
		if e.Err != nil {
			what += ": " + e.Err.Error()
		}
	}
	return []string{fmt.Sprintf("link group 0x%08x (%s, %s): link %d %s", e.LinkGroup, e.Role, e.LinkGroupType, e.Link.ID, what),
		"  " + linkText(e.Link)}
}

// signallingText says how SMC capability is learnt in a mode.
func signallingText(s smcr.Signalling, speaks bool) string {
	switch {
	case s == smcr.SignalOption:
		return "SMC signalled by the TCP option"
	case speaks:
		return "unprivileged: no TCP option, -peer-speaks-smc"
	}
	return "unprivileged: no TCP option, peer not said to speak SMC"
}

func fallbackBy(by string) string {
	switch by {
	case "local":
		return "this side"
	case "peer":
		return "the peer"
	}
	return by
}

// fallbackHint says what to do about a fallback's reason (the peer's
// own when it declined), where smcat can tell.
func fallbackHint(i smcr.ConnInfo) string {
	reason, peer := i.Fallback, false
	if i.FallbackBy == "peer" && i.PeerDiagnosis != 0 {
		reason, peer = i.PeerDiagnosis, true
	}
	switch {
	case reason == smcwire.DiagNoSMCRDev && !peer:
		return "the goroce device on the local address could not be opened: is another goroce process using that address (UDP port 4791)? Dial from another local address with -s."
	case reason == smcwire.DiagNoSMCRDev:
		return "the peer has no SMC-R device for this connection's path (on Linux: an RDMA device on the interface, e.g. rdma link add rxe0 type rxe netdev eth0, and a pnet entry or a UEID)."
	case reason == smcwire.DiagPeerNoSMC && i.Signalling == smcr.SignalOption:
		return "the peer's handshake carried no SMC option: it does not speak SMC (or is an unprivileged smcat: then pass -peer-speaks-smc on both sides)."
	case reason == smcwire.DiagPeerNoSMC:
		return "this side was not told that the peer speaks SMC: pass -peer-speaks-smc on both sides (or run both as root, where the TCP option says so)."
	case reason == smcwire.DiagNoUEID:
		return "no common UEID: give both sides the same one (-ueid NAME here, `smcr ueid add NAME` on Linux)."
	case reason == smcwire.DiagDiffPrefix:
		return "SMC-Rv1 needs both devices on one IP subnet, and these are not: offer SMC-Rv2, which does not, with the same -ueid NAME on both sides (`smcr ueid add NAME` on Linux)."
	case reason == smcwire.DiagVersMismatch || reason == smcwire.DiagNoV2Ext:
		return "the two sides offered no common SMC version: give both the same -ueid NAME for SMC-Rv2 (`smcr ueid add NAME` on Linux)."
	case reason == smcwire.DiagTimeoutCL || reason == smcwire.DiagTimeoutAL:
		return "the handshake timed out: is the peer's RoCE device reachable (UDP port 4791 between the two addresses)?"
	}
	return ""
}

// sizeText prints a buffer size in KiB when it is a whole number of them.
func sizeText(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

// pathWords say how a link's device reaches its peer's (smcr.LinkInfo.Path).
var pathWords = map[string]string{
	"udp":        "UDP",
	"shm":        "shared memory",
	"connecting": "shared memory (pairing)",
}
