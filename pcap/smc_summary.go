package pcap

import (
	"fmt"
	"strings"

	"github.com/goroce/goroce/smcr/smcwire"
)

func clcSummary(sb *strings.Builder, c *SMCCLC) {
	fmt.Fprintf(sb, "CLC %s len %d", c.Name(), c.Length)
	if c.Header.SMCD {
		sb.WriteString(" smcd")
	}
	switch {
	case c.Proposal != nil:
		p := c.Proposal
		fmt.Fprintf(sb, " v1 %s v2 %s", p.TypeV1, p.TypeV2)
		if a := p.IPArea; a != nil {
			fmt.Fprintf(sb, " subnet %s/%d", a.Subnet, a.PrefixLen)
			if len(a.IPv6Prefixes) > 0 {
				fmt.Fprintf(sb, " ipv6 prefixes %d", len(a.IPv6Prefixes))
			}
		}
		if v := p.V2Ext; v != nil {
			fmt.Fprintf(sb, " release %d gid %s", v.Release, v.RoCEGID)
			if v.Release >= 1 {
				fmt.Fprintf(sb, " max conns %d links %d", v.MaxConns, v.MaxLinks)
			}
			for _, e := range v.UserEIDs {
				fmt.Fprintf(sb, " eid %q", e.String())
			}
		}
	case c.AcceptConfirm != nil:
		a := c.AcceptConfirm
		fmt.Fprintf(sb, " qpn 0x%x psn %d mtu %d rkey 0x%x va 0x%x token %d rmbe %d",
			a.QPN, a.PSN, a.QPMTU.Bytes(), a.RMBRKey, a.RMBVA, a.AlertToken, smcwire.RMBESize(a.RMBESizeCode))
		if e := a.FirstContactExt; e != nil {
			fmt.Fprintf(sb, " host %q os %s release %d", e.Hostname.String(), e.OSType, e.Release)
			if e.V2Direct {
				sb.WriteString(" direct")
			}
		}
		for _, g := range a.GIDs {
			fmt.Fprintf(sb, " gid %s", g)
		}
	case c.Decline != nil:
		fmt.Fprintf(sb, " diag %s", c.Decline.Diagnosis)
	}
}

func llcSummary(sb *strings.Builder, l *SMCLLC) {
	fmt.Fprintf(sb, "LLC %s len %d", l.Name(), l.Length)
	switch {
	case l.ConfirmLink != nil:
		m := l.ConfirmLink
		fmt.Fprintf(sb, " link %d qpn 0x%x gid %s max links %d", m.LinkNum, m.SenderQPN, m.SenderGID, m.MaxLinks)
		if l.Type.Version() == 2 {
			fmt.Fprintf(sb, " conns %d", m.MaxConns)
		}
	case l.AddLink != nil:
		m := l.AddLink
		if l.Flags&smcwire.LLCFlagAddLinkReject != 0 {
			sb.WriteString(" rejected")
			if m.RejectReason != 0 {
				fmt.Fprintf(sb, " reason %d", m.RejectReason)
			}
		}
		fmt.Fprintf(sb, " link %d qpn 0x%x psn %d mtu %d gid %s", m.LinkNum, m.SenderQPN, m.InitialPSN, m.QPMTU.Bytes(), m.SenderGID)
		if e := m.V2Ext; e != nil {
			for _, r := range e.RKeys {
				fmt.Fprintf(sb, " rkey 0x%x->0x%x", r.RKey, r.RKeyNew)
			}
		}
	case l.AddLinkCont != nil:
		for _, r := range l.AddLinkCont.RKeys {
			fmt.Fprintf(sb, " rkey 0x%x->0x%x", r.RKey, r.RKeyNew)
		}
	case l.DeleteLink != nil:
		if l.Flags&smcwire.LLCFlagDeleteAll != 0 {
			sb.WriteString(" all")
		} else {
			fmt.Fprintf(sb, " link %d", l.DeleteLink.LinkNum)
		}
		if l.Flags&smcwire.LLCFlagDeleteOrderly != 0 {
			sb.WriteString(" orderly")
		}
		fmt.Fprintf(sb, " reason %s", l.DeleteLink.Reason)
	case l.RequestAddLink != nil:
		for _, g := range l.RequestAddLink.GIDs {
			fmt.Fprintf(sb, " gid %s", g)
		}
	case l.ConfirmRKey != nil:
		rkeyNegative(sb, l.Flags)
		for _, t := range l.ConfirmRKey.RTokens {
			fmt.Fprintf(sb, " rkey 0x%x va 0x%x", t.RKey, t.VA)
		}
	case l.ConfirmRKeyCont != nil:
		rkeyNegative(sb, l.Flags)
		for _, t := range l.ConfirmRKeyCont.RTokens {
			fmt.Fprintf(sb, " rkey 0x%x va 0x%x", t.RKey, t.VA)
		}
	case l.DeleteRKey != nil:
		rkeyNegative(sb, l.Flags)
		for _, k := range l.DeleteRKey.RKeys {
			fmt.Fprintf(sb, " rkey 0x%x", k)
		}
	}
}

func rkeyNegative(sb *strings.Builder, f smcwire.LLCFlags) {
	if f&smcwire.LLCFlagRKeyNegative != 0 {
		sb.WriteString(" negative")
	}
}

func cdcSummary(sb *strings.Builder, c *SMCCDC) {
	fmt.Fprintf(sb, "CDC seq %d token %d prod %d:%d cons %d:%d", c.Seq, c.Token,
		c.Prod.Wrap, c.Prod.Count, c.Cons.Wrap, c.Cons.Count)
	for _, f := range CDCFlagNames(c.ProdFlags, c.ConnFlags) {
		sb.WriteString(" " + f)
	}
}

// CDCFlagNames names the set flags of a CDC message: write_blocked,
// urgent_pending, urgent_present, cons_update_requested,
// failover_validation, peer_done_writing, peer_conn_closed,
// peer_conn_abort (the names of CATALOG.md and Linux's bitfields).
func CDCFlagNames(p smcwire.CDCProdFlags, c smcwire.CDCConnFlags) []string {
	var out []string
	for _, f := range []struct {
		set  bool
		name string
	}{
		{p&smcwire.CDCWriteBlocked != 0, "write_blocked"},
		{p&smcwire.CDCUrgentPending != 0, "urgent_pending"},
		{p&smcwire.CDCUrgentPresent != 0, "urgent_present"},
		{p&smcwire.CDCConsUpdateRequest != 0, "cons_update_requested"},
		{p&smcwire.CDCFailoverValidate != 0, "failover_validation"},
		{c&smcwire.CDCPeerDoneWriting != 0, "peer_done_writing"},
		{c&smcwire.CDCPeerConnClosed != 0, "peer_conn_closed"},
		{c&smcwire.CDCPeerConnAbort != 0, "peer_conn_abort"},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}
