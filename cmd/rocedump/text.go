package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/goroce/goroce/pcap"
)

// formatTime prints t as seconds.microseconds since first, or since the
// Unix epoch when abs is set.
func formatTime(t, first time.Time, abs bool) string {
	if abs {
		return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
	}
	d := t.Sub(first)
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("%s%d.%06d", sign, d/time.Second, d%time.Second/time.Microsecond)
}

// hostPort prints an address and port the way tcpdump does: addr.port.
func hostPort(a netip.Addr, port uint16) string {
	if !a.IsValid() {
		return "?." + strconv.Itoa(int(port))
	}
	return a.String() + "." + strconv.Itoa(int(port))
}

// textLine is the one-line summary of a RoCE packet.
func textLine(ts string, r *roce, smc, mad string) string {
	b := r.bth
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s > %s: %s qp 0x%x psn %d", ts, hostPort(r.src, r.sport), hostPort(r.dst, r.dport),
		b.Opcode, b.DestQP, b.PSN)
	for _, f := range []struct {
		set  bool
		name string
	}{{b.AckReq, "ackreq"}, {b.SE, "se"}, {b.MigReq, "migreq"}, {b.FECN, "fecn"}, {b.BECN, "becn"}} {
		if f.set {
			sb.WriteString(" " + f.name)
		}
	}
	if b.PKey != 0xFFFF {
		fmt.Fprintf(&sb, " pkey 0x%04x", b.PKey)
	}
	for _, l := range r.exts {
		switch h := l.(type) {
		case *pcap.DETH:
			fmt.Fprintf(&sb, " deth(qkey=0x%x sqpn=0x%x)", h.QKey, h.SrcQP)
		case *pcap.FETH:
			fmt.Fprintf(&sb, " feth(placement=%d selectivity=%d)", h.PlacementType, h.SelectivityLevel)
		case *pcap.RETH:
			fmt.Fprintf(&sb, " reth(va=0x%x rkey=0x%x len=%d)", h.VA, h.RKey, h.DMALength)
		case *pcap.AtomicETH:
			fmt.Fprintf(&sb, " atomiceth(va=0x%x rkey=0x%x swap=0x%x cmp=0x%x)", h.VA, h.RKey, h.SwapAdd, h.Compare)
		case *pcap.AETH:
			fmt.Fprintf(&sb, " aeth(%s msn=%d)", h.Syndrome, h.MSN)
		case *pcap.AtomicAckETH:
			fmt.Fprintf(&sb, " atomicacketh(orig=0x%x)", h.Orig)
		case *pcap.ImmDt:
			fmt.Fprintf(&sb, " immdt=0x%08x", h.Imm)
		case *pcap.IETH:
			fmt.Fprintf(&sb, " ieth(rkey=0x%x)", h.RKey)
		}
	}
	fmt.Fprintf(&sb, " payload %d", len(b.Packet().Payload()))
	switch {
	case !r.verifiable:
		sb.WriteString(" icrc unverifiable")
	case r.icrcOK:
		sb.WriteString(" icrc ok")
	default:
		sb.WriteString(" icrc BAD")
	}
	if smc != "" {
		sb.WriteString(" smc " + smc)
	}
	if mad != "" {
		sb.WriteString(" " + mad)
	}
	return sb.String()
}
