//go:build linux

package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/goroce/goroce/rocev2"
)

// The checks of how goroce's AF_PACKET backend puts its packets on the
// wire, from the capture (rocev2/afpacket's documentation says what it
// sends): every RoCE packet of goroce's has
//
//   - the UDP source port rxe gives the QP: for RC and UC the port of the
//     connection's flow label (rdma_calc_flow_label of the two QP numbers:
//     neither ibv_rc_pingpong nor goroce's sets one in the address vector),
//     which is the same at both ends, so rxe's packets of the connection
//     carry it too; for UD the port of goroce's own QP;
//   - over IPv4, DF and an IPv4 ID one more than goroce's previous
//     packet's (one sequence per device; a gap only where tcpdump dropped
//     packets);
//   - over IPv6, the flow label the port was folded from (0 for UD).
//
// goroce's QP numbers are the destination QPs of rxe's RC and UC packets
// (RC and UC packets carry no source QP), and the DETH's source QP of its
// UD packets.
//
// and the TTL (hop limit) rxe's packets carry: a kernel RoCE device sends
// the route's, because ib_core replaces every unicast RoCE address
// vector's hop limit with the route's when it resolves the MAC
// (ib_resolve_unicast_gid_dmac), so rxe sends 64 where rc_pingpong asks
// for 1, and so must goroce (a frame with TTL 1 would not pass a router).

// wireFrame is one RoCE packet's sender-chosen fields.
type wireFrame struct {
	frame     int
	src       string // role address: guestIP (rxe) or hostIP (goroce)
	transport uint8  // BTH opcode's top three bits: 0 RC, 1 UC, 3 UD
	dqpn      uint32
	sqpn      uint32 // UD: the DETH's source QP
	sport     uint16
	ttl       uint8 // IPv6: hop limit
	ipid      *uint16
	df        *bool
	flowLabel *uint32
}

const (
	transportRC = 0
	transportUC = 1
	transportUD = 3
)

// role maps a wire address to the role address it counts as.
func (cc *captureCheck) role(addr string) string {
	if r, ok := cc.alias[addr]; ok {
		return r
	}
	return addr
}

// addWire keeps a -json line's sender-chosen fields.
func (cc *captureCheck) addWire(j *rocedumpJSON) {
	f := wireFrame{frame: j.Frame, src: cc.role(j.Src), transport: j.Opcode >> 5, dqpn: j.DQPN,
		sport: j.SPort, ttl: j.TTL, ipid: j.IPv4ID, df: j.DF, flowLabel: j.FlowLabel}
	if j.DETH != nil {
		f.sqpn = j.DETH.SQPN
	}
	cc.wire = append(cc.wire, f)
}

// checkWire returns the case's failures and notes about goroce's frames:
// the AF_PACKET checks above for an afpacket case, and over IPv6 that the
// packets were IPv6 at all. A UDP-backend case over IPv4 has none.
func (cc *captureCheck) checkWire(c *testCase) (fails, notes []string) {
	if c.ipv6 {
		for _, f := range cc.wire {
			if (f.src == hostIP || f.src == guestIP) && f.ipid != nil {
				fails = append(fails, fmt.Sprintf("frame %d: an IPv6 case's RoCE packet went over IPv4", f.frame))
				break
			}
		}
	}
	if c.backend != afpacket {
		return fails, notes
	}
	var goroce []wireFrame
	goroceQPs := map[uint32]bool{}
	rxePorts := map[uint16]int{}
	ttls := map[string]map[uint16]int{hostIP: {}, guestIP: {}}
	for _, f := range cc.wire {
		if m := ttls[f.src]; m != nil {
			m[uint16(f.ttl)]++
		}
		switch f.src {
		case hostIP:
			goroce = append(goroce, f)
		case guestIP:
			if f.transport == transportRC || f.transport == transportUC {
				goroceQPs[f.dqpn] = true
				rxePorts[f.sport]++
			}
		}
	}
	if len(goroce) == 0 {
		return fails, notes // the capture check says so already
	}
	var badPort, badLabel, noDF, idGaps int
	var firstBadPort, firstBadLabel, firstGap string
	ports := map[uint16]int{}
	tolerance := uint16(cc.dropped) + 1 // tcpdump's drops leave gaps
	for i, f := range goroce {
		ports[f.sport]++
		port, label, ok := expectedPort(f, goroceQPs)
		if !ok || f.sport != port {
			badPort++
			if firstBadPort == "" {
				firstBadPort = fmt.Sprintf("frame %d: %d, want %s", f.frame, f.sport, portWant(f, goroceQPs))
			}
		}
		if c.ipv6 && ok && (f.flowLabel == nil || *f.flowLabel != label) {
			badLabel++
			if firstBadLabel == "" {
				firstBadLabel = fmt.Sprintf("frame %d: %s, want %#x", f.frame, optU32(f.flowLabel), label)
			}
		}
		if c.ipv6 {
			continue
		}
		if f.df == nil || !*f.df {
			noDF++
		}
		if i > 0 && f.ipid != nil && goroce[i-1].ipid != nil {
			if d := *f.ipid - *goroce[i-1].ipid; d == 0 || d > tolerance {
				idGaps++
				if firstGap == "" {
					firstGap = fmt.Sprintf("frame %d: ID %d after %d", f.frame, *f.ipid, *goroce[i-1].ipid)
				}
			}
		}
	}
	n := len(goroce)
	if badPort > 0 {
		fails = append(fails, fmt.Sprintf("afpacket: %d of %d goroce packets have a UDP source port other than rxe's for the QP (first: %s)", badPort, n, firstBadPort))
	}
	if badLabel > 0 {
		fails = append(fails, fmt.Sprintf("afpacket: %d of %d goroce packets have an IPv6 flow label other than the one of their source port (first: %s)", badLabel, n, firstBadLabel))
	}
	if noDF > 0 {
		fails = append(fails, fmt.Sprintf("afpacket: %d of %d goroce packets lack DF", noDF, n))
	}
	if idGaps > 0 {
		fails = append(fails, fmt.Sprintf("afpacket: goroce's IPv4 IDs are not one sequence: %d breaks in %d packets (first: %s; tcpdump dropped %d)", idGaps, n, firstGap, cc.dropped))
	}
	desc := "source port " + portSet(ports)
	if !c.ipv6 && goroce[0].ipid != nil && goroce[n-1].ipid != nil {
		desc += fmt.Sprintf(", IPv4 IDs %d..%d", *goroce[0].ipid, *goroce[n-1].ipid)
	}
	if len(rxePorts) > 0 {
		desc += "; rxe's: " + portSet(rxePorts)
		if portSet(rxePorts) != portSet(ports) {
			desc += " (not the same: rxe did not take the connection's flow label port)"
		}
	}
	if len(ttls[guestIP]) > 0 && portSet(ttls[hostIP]) != portSet(ttls[guestIP]) {
		fails = append(fails, fmt.Sprintf("afpacket: goroce's packets leave with TTL %s, rxe's with %s (the route's)", portSet(ttls[hostIP]), portSet(ttls[guestIP])))
	}
	desc += fmt.Sprintf("; TTL goroce %s, rxe %s", portSet(ttls[hostIP]), portSet(ttls[guestIP]))
	notes = append(notes, fmt.Sprintf("goroce's %d frames: %s", n, desc))
	return fails, notes
}

// expectedPort returns the source port (and IPv6 flow label) goroce's
// packet f must have: for RC and UC the port of the flow label of goroce's
// QP and f's destination QP (one of qps: the QPs rxe sent to, matched by
// the port itself when there are several), for UD its own QP's port.
func expectedPort(f wireFrame, qps map[uint32]bool) (port uint16, label uint32, ok bool) {
	switch f.transport {
	case transportUD:
		return rocev2.QPSourcePort(f.sqpn), 0, true
	case transportRC, transportUC:
		for q := range qps {
			fl := rocev2.CalcFlowLabel(q, f.dqpn)
			port, label, ok = rocev2.FlowLabelSourcePort(fl), fl, true
			if port == f.sport {
				return port, label, true
			}
		}
	}
	return port, label, ok
}

// portWant says what expectedPort wanted, for a failure.
func portWant(f wireFrame, qps map[uint32]bool) string {
	if f.transport == transportUD {
		return fmt.Sprintf("%d (UD QP %#x's)", rocev2.QPSourcePort(f.sqpn), f.sqpn)
	}
	if len(qps) == 0 {
		return "a port from goroce's QP number, which the capture does not show (no RC/UC packet from rxe)"
	}
	var w []string
	for q := range qps {
		w = append(w, fmt.Sprintf("%d (QPs %#x, %#x)", rocev2.FlowLabelSourcePort(rocev2.CalcFlowLabel(q, f.dqpn)), q, f.dqpn))
	}
	sort.Strings(w)
	return strings.Join(w, " or ")
}

// portSet prints the ports (or TTLs), sorted.
func portSet(m map[uint16]int) string {
	ps := make([]int, 0, len(m))
	for p := range m {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%d", p))
	}
	return strings.Join(s, ",")
}

func optU32(v *uint32) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("%#x", *v)
}
