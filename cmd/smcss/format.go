package main

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// addrShort is smcss's address column width: a longer address is cut
// (with "..") unless -W.
const addrShort = 23

// format renders the table: smcss's header and one line per selected
// socket, processes by PID and each one's sockets by address.
func format(procs []*smcr.Published, o *options) string {
	var b strings.Builder
	b.WriteString(header(o))
	var more []string
	for _, p := range procs {
		socks := slices.Clone(p.Sockets)
		slices.SortStableFunc(socks, func(x, y smcr.Socket) int {
			if c := x.Local.Compare(y.Local); c != 0 {
				return c
			}
			return x.Peer.Compare(y.Peer)
		})
		for i := range socks {
			if selected(&socks[i], o) {
				b.WriteString(row(p, &socks[i], o))
			}
		}
		if p.More > 0 {
			more = append(more, fmt.Sprintf("(process %d has %d more sockets than it lists)\n", p.PID, p.More))
		}
	}
	for _, m := range more {
		b.WriteString(m)
	}
	return b.String()
}

// selected reports whether o shows s.
func selected(s *smcr.Socket, o *options) bool {
	switch {
	case o.listening:
		return s.Listening()
	case s.Listening():
		return o.all && !o.smcr
	case o.smcr:
		return s.Mode != smcr.ModeFallback
	}
	return true
}

func header(o *options) string {
	var b strings.Builder
	b.WriteString("State          UID   PID     Local Address           ")
	if !o.listening {
		b.WriteString("Peer Address            Mode   ")
		if o.extended {
			b.WriteString("Shutd Token    Sndbuf   Rcvbuf   Peerbuf  Tx-Bytes     Rx-Bytes     ")
		}
		if o.smcr {
			b.WriteString("Role Device                Linkid LGR      QPN    Peer-QPN GID                     Peer-GID")
		}
	}
	return endLine(&b)
}

// row is one socket's line: fallback and listening sockets end where
// smcss ends them (after the mode, after the local address).
func row(p *smcr.Published, s *smcr.Socket, o *options) string {
	var sb strings.Builder
	b := &sb
	fmt.Fprintf(b, "%-14s %05d %-7d ", stateText(s.State), p.UID, p.PID)
	col(b, addrText(s.Local, o.wide), addrShort)
	if s.Listening() {
		return endLine(b)
	}
	col(b, addrText(s.Peer, o.wide), addrShort)
	if s.Mode == smcr.ModeFallback {
		fmt.Fprintf(b, "%s %s", fallbackText(s), reasonText(s))
		return endLine(b)
	}
	col(b, modeText(s.Mode), 6)
	if o.extended {
		fmt.Fprintf(b, " %c-%c  %08x %08x %08x %08x %-12d %-12d ", shutChar(s.Shutdown&1 != 0, 'R', '<'), shutChar(s.Shutdown&2 != 0, 'W', '>'),
			s.Token, s.SendBufSize, s.RMBSize, s.PeerRMBSize, s.BytesSent, s.BytesReceived)
	}
	if !o.smcr {
		return endLine(b)
	}
	own, others := ownLink(s.Links)
	fmt.Fprintf(b, "%4s ", roleText(s.Role))
	linkCols(b, s, own)
	out := endLine(b)
	// The group's other links, each on a line of its own under the
	// connection's (as `smcr linkgroup show links` lists them), with
	// their state.
	for _, l := range others {
		var lb strings.Builder
		fmt.Fprintf(&lb, "%*s%-4s ", linkIndent, "", "+")
		linkCols(&lb, s, l)
		lb.WriteString(" " + stateText(l.State))
		out += endLine(&lb)
	}
	return out
}

// linkIndent is where -R's link columns begin (Role).
const linkIndent = len("State          UID   PID     Local Address           Peer Address            Mode   ")

// ownLink returns the link a connection sends on (the one marked in use,
// else the first) and the group's other links.
func ownLink(ls []smcr.LinkInfo) (own smcr.LinkInfo, others []smcr.LinkInfo) {
	i := slices.IndexFunc(ls, func(l smcr.LinkInfo) bool { return l.InUse })
	if i < 0 {
		i = 0
	}
	if len(ls) == 0 {
		return own, nil
	}
	return ls[i], append(slices.Clone(ls[:i]), ls[i+1:]...)
}

// linkCols writes -R's columns of link l of socket s: its device, id,
// group, QPNs and GIDs.
func linkCols(b *strings.Builder, s *smcr.Socket, l smcr.LinkInfo) {
	dev := s.Device
	if l.Device.IsValid() {
		dev = l.Device
	}
	col(b, dev.String(), 21)
	fmt.Fprintf(b, "%02x     %08x %06x %06x   ", l.ID, s.LinkGroup, l.LocalQPN, l.PeerQPN)
	col(b, gidText(l.LocalGID), 23)
	b.WriteString(gidText(l.PeerGID))
}

// col writes s padded to width, and a space.
func col(b *strings.Builder, s string, width int) {
	fmt.Fprintf(b, "%-*s ", width, s)
}

// endLine ends a line without trailing blanks.
func endLine(b *strings.Builder) string {
	return strings.TrimRight(b.String(), " ") + "\n"
}

// addrText is an address as smcss prints it: no brackets, and unless wide
// cut to addrShort with "..".
func addrText(ap netip.AddrPort, wide bool) string {
	if !ap.IsValid() {
		return "*"
	}
	a, port := ap.Addr().String(), strconv.Itoa(int(ap.Port()))
	if !wide && len(a)+1+len(port) > addrShort {
		a = a[:addrShort-1-len(port)-2] + ".."
	}
	return a + ":" + port
}

func modeText(m smcr.Mode) string {
	switch m {
	case smcr.ModeSMCRv1:
		return "SMCRv1"
	case smcr.ModeSMCRv2:
		return "SMCRv2"
	}
	return "TCP"
}

// fallbackText is the mode of a fallback: TCP, Linux's reason code, and
// the peer's when it declined.
func fallbackText(s *smcr.Socket) string {
	t := fmt.Sprintf("TCP 0x%08x", s.Fallback)
	if s.PeerDiagnosis != 0 {
		t += fmt.Sprintf("/0x%08x", s.PeerDiagnosis)
	}
	return t
}

// reasonText explains a fallback's codes in Linux's words.
func reasonText(s *smcr.Socket) string {
	name := func(c uint32) string {
		if n := smcwire.DiagCode(c).Name(); n != "" {
			return n
		}
		return "unknown reason"
	}
	t := name(s.Fallback)
	if s.PeerDiagnosis != 0 {
		t += ": " + name(s.PeerDiagnosis)
	}
	return "(" + t + ")"
}

// stateText prints a state name as it came if it looks like one (the
// publisher is another process: nothing it says reaches the terminal
// unchecked).
func stateText(s string) string {
	if s == "" || len(s) > 16 {
		return "?"
	}
	for _, c := range s {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return "?"
		}
	}
	return s
}

func roleText(r string) string {
	switch r {
	case "client":
		return "CLNT"
	case "server":
		return "SERV"
	}
	return "?"
}

func shutChar(set bool, yes, no byte) byte {
	if set {
		return yes
	}
	return no
}

// gidText prints a GID: an IPv4-mapped one as the IPv4 address.
func gidText(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	return a.Unmap().String()
}
