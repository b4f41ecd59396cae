package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
)

// stats is smcr stats [show | json]: the processes' statistics summed.
func stats(o *options, procs []*smcr.Published, args []string, w io.Writer) error {
	asJSON := false
	switch {
	case len(args) == 0, isPrefix(args[0], "show"):
	case isPrefix(args[0], "json"):
		asJSON = true
	case isPrefix(args[0], "reset"):
		return fmt.Errorf("stats reset is not supported: a goroce process's counters start with it, and smcr keeps no reset point")
	default:
		return fmt.Errorf("stats: unknown command %q", args[0])
	}
	if len(args) > 1 {
		return fmt.Errorf("stats: unexpected %q", args[1])
	}
	var sum smcr.Stats
	var summed []*smcr.Published
	for _, p := range procs {
		if p.Stats != nil {
			sum.Add(p.Stats)
			summed = append(summed, p)
		}
	}
	if asJSON {
		return writeJSON(w, &sum)
	}
	return writeText(w, &sum, summed, o.detail > 0)
}

// writeText is smc-tools' print_as_text, and goroce's extras.
func writeText(w io.Writer, s *smcr.Stats, procs []*smcr.Published, detail bool) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	conns := s.ClientV1 + s.ClientV2 + s.ServerV1 + s.ServerV2
	hsErr := s.ClientHandshakeErrors + s.ServerHandshakeErrors
	fallbacks := s.ClientFallbacks + s.ServerFallbacks
	p("SMC-R Connections Summary\n")
	p("  Total connections handled  %12d\n", conns+hsErr+fallbacks)
	if detail {
		p("  SMC connections            %12d (client %d, server %d)\n", conns, s.ClientV1+s.ClientV2, s.ServerV1+s.ServerV2)
		p("    v1                       %12d\n", s.ClientV1+s.ServerV1)
		p("    v2                       %12d\n", s.ClientV2+s.ServerV2)
		p("  Handshake errors           %12d (client %d, server %d)\n", hsErr, s.ClientHandshakeErrors, s.ServerHandshakeErrors)
	} else {
		p("  SMC connections            %12d\n", conns)
		p("  Handshake errors           %12d\n", hsErr)
	}
	p("  Avg requests per SMC conn  %14.1f\n", ratio(s.RxCalls+s.TxCalls, conns, 1))
	if detail {
		p("  TCP fallback               %12d (client %d, server %d)\n", fallbacks, s.ClientFallbacks, s.ServerFallbacks)
		for _, server := range []bool{true, false} {
			shown := 0
			for _, r := range s.FallbackReasons { // the most frequent first
				if r.Server != server || shown == 3 {
					continue
				}
				if shown == 0 {
					p("    %s\n", map[bool]string{true: "Server", false: "Client"}[server])
				}
				p("     %-12s            %12d\n", reasonName(r.Code), r.Count)
				shown++
			}
		}
	} else {
		p("  TCP fallback               %12d\n", fallbacks)
	}
	p("\nRX Stats\n")
	p("  Data transmitted (Bytes) %14d (%s)\n", s.RxBytes, abbreviated(s.RxBytes, 6))
	p("  Total requests             %12d\n", s.RxCalls)
	p("  Buffer full                %12d (%.2f%%)\n", s.RMB.Full, ratio(s.RMB.Full, s.RxCalls, 100))
	if detail {
		p("  Buffer downgrades          %12d\n", s.RMB.Downgrade)
		p("  Buffer reuses              %12d\n", s.RMB.Reuse)
	}
	buckets(&b, s.RMB.Sizes, s.RxPayload)
	p("\nTX Stats\n")
	p("  Data transmitted (Bytes) %14d (%s)\n", s.TxBytes, abbreviated(s.TxBytes, 6))
	p("  Total requests             %12d\n", s.TxCalls)
	p("  Buffer full                %12d (%.2f%%)\n", s.SendBuf.Full, ratio(s.SendBuf.Full, s.TxCalls, 100))
	p("  Buffer full (remote)       %12d (%.2f%%)\n", s.SendBuf.FullPeer, ratio(s.SendBuf.FullPeer, s.TxCalls, 100))
	p("  Buffer too small           %12d (%.2f%%)\n", s.SendBuf.SizeSmall, ratio(s.SendBuf.SizeSmall, s.TxCalls, 100))
	p("  Buffer too small (remote)  %12d (%.2f%%)\n", s.SendBuf.SizeSmallPeer, ratio(s.SendBuf.SizeSmallPeer, s.TxCalls, 100))
	if detail {
		p("  Buffer downgrades          %12d\n", s.SendBuf.Downgrade)
		p("  Buffer reuses              %12d\n", s.SendBuf.Reuse)
	}
	buckets(&b, s.SendBuf.Sizes, s.TxPayload)
	p("\nExtras\n")
	p("  Special socket calls       %12d\n", 0) // cork, nodelay, sendpage, splice, urgent data: a net.Conn has none
	if detail {
		for _, name := range []string{"cork", "nodelay", "sendpage", "splice", "urgent data"} {
			p("    %-24s %12d\n", name, 0)
		}
	}
	p("  CDC messages sent          %12d\n", s.CDCSent)
	p("  CDC messages received      %12d\n", s.CDCReceived)
	p("  LLC messages sent          %12d\n", s.LLCSent)
	p("  LLC messages received      %12d\n", s.LLCReceived)
	if detail {
		var ids []string
		for _, pr := range procs {
			ids = append(ids, fmt.Sprintf("%d (%s)", pr.PID, pr.Program))
		}
		p("\nProcesses summed: %d", len(procs))
		if len(ids) > 0 {
			p(": %s", strings.Join(ids, ", "))
		}
		p("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// buckets prints the Bufs and Reqs rows: the 1 MiB and larger buckets
// together under >512KB, as smc-tools' fillbuffer.
func buckets(b *strings.Builder, bufs, reqs [smcr.NumSizeBuckets]uint64) {
	b.WriteString("            8KB    16KB    32KB    64KB   128KB   256KB   512KB  >512KB\n")
	for _, row := range []struct {
		name string
		v    [smcr.NumSizeBuckets]uint64
	}{{"Bufs", bufs}, {"Reqs", reqs}} {
		fmt.Fprintf(b, "  %-4s ", row.name)
		for i := range 8 {
			n := row.v[i]
			if i == 7 {
				n += row.v[8]
			}
			fmt.Fprintf(b, "  %6s", abbreviated(n, 6))
		}
		b.WriteString("\n")
	}
}

func ratio(n, d uint64, scale float64) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d) * scale
}

// abbreviated writes n in at most digits characters, as smc-tools'
// get_abbreviated: up to three digits as they are, else scaled to K, M, G,
// T or P with as many decimals as fit (1.23M, 12.3K, 123K).
func abbreviated(n uint64, digits int) string {
	s := strconv.FormatUint(n, 10)
	if len(s) < 4 {
		return s
	}
	lead := len(s)
	for range 2 {
		whole := lead % 3
		if whole == 0 {
			whole = 3
		}
		places := digits - whole - 2
		if places <= 0 {
			places, whole = 0, digits-1
		}
		group := (lead - 1) / 3 // thousands: K 1, M 2, ...
		unit := "KMGTP?"[min(group-1, 5)]
		v := float64(n) / math.Pow(1000, float64(group))
		if v+5*math.Pow(10, float64(-1-places)) < math.Pow(10, float64(whole)) {
			return fmt.Sprintf("%*.*f%c", digits-1, places, v, unit)
		}
		if places > 0 { // 9.96 with one decimal would read 10.0: one decimal fewer
			return fmt.Sprintf("%*.*f%c", digits-1, places-1, v, unit)
		}
		lead++ // 999.9 K reads 1.0 M
	}
	return s
}

// reasonName is smc-tools' short name of a fallback reason.
func reasonName(c smcwire.DiagCode) string {
	if n, ok := reasonNames[c]; ok {
		return n
	}
	return "[unknown]"
}

var reasonNames = map[smcwire.DiagCode]string{
	smcwire.DiagPeerNoSMC: "PEER_NO_SMC", smcwire.DiagMem: "MEMORY", smcwire.DiagTimeoutCL: "TIMEOUT_CL",
	smcwire.DiagTimeoutAL: "TIMEOUT_AL", smcwire.DiagCnfErr: "CNF_ERR", smcwire.DiagIPsec: "IPSEC",
	smcwire.DiagNoSMCDev: "NOSMCDEV", smcwire.DiagNoSMCDDev: "NOSMCDDEV", smcwire.DiagNoSMCRDev: "NOSMCRDEV",
	smcwire.DiagNoISM2Supp: "NOISM2SUPP", smcwire.DiagNoV2Ext: "NOV2EXT", smcwire.DiagPeerDecl: "PEERDECL",
	smcwire.DiagSyncErr: "SYNCERR", smcwire.DiagMaxDMB: "MAX_DMB", smcwire.DiagVersMismatch: "VERSMISMAT",
	smcwire.DiagNoSrvLink: "NOSRVLINK", smcwire.DiagNoSEID: "NOSEID", smcwire.DiagNoSMCD2Dev: "NOSMCD2DEV",
	smcwire.DiagModeUnsupp: "MODEUNSUPP", smcwire.DiagRMBEEC: "RMBE_EC", smcwire.DiagOptUnsupp: "OPTUNSUPP",
	smcwire.DiagDiffPrefix: "DIFFPREFIX", smcwire.DiagGetVLANErr: "GETVLANERR", smcwire.DiagISMVLANErr: "ISMVLANERR",
	smcwire.DiagNoActLink: "NOACTLINK", smcwire.DiagNoV2DExt: "NOV2DEXT", smcwire.DiagNoUEID: "NOUEID",
}

// writeJSON is smc-tools' print_as_json: the SMC-R counters in the order
// of Linux's smc_stats_tech, under smc-tools' names.
func writeJSON(w io.Writer, s *smcr.Stats) error {
	var keys []string
	var vals []uint64
	add := func(k string, v uint64) { keys, vals = append(keys, k), append(vals, v) }
	sizes := []string{"8K", "16K", "32K", "64K", "128K", "256K", "512K", "1024K", "G_1024K"}
	for _, part := range []struct {
		name string
		v    [smcr.NumSizeBuckets]uint64
	}{{"INT_TX_BUF", s.SendBuf.Sizes}, {"INT_RX_BUF", s.RMB.Sizes}, {"USR_TX_BUF", s.TxPayload}, {"USR_RX_BUF", s.RxPayload}} {
		for i, sz := range sizes {
			add("SMC_"+part.name+"_"+sz, part.v[i])
		}
	}
	for _, dir := range []struct {
		name string
		b    *smcr.BufStats
	}{{"TX", &s.SendBuf}, {"RX", &s.RMB}} {
		pre := "SMC_INT_" + dir.name + "_BUF_"
		add(pre+"SIZE_SM_PEER_CNT", dir.b.SizeSmallPeer)
		add(pre+"SIZE_SM_CNT", dir.b.SizeSmall)
		add(pre+"FULL_PEER_CNT", dir.b.FullPeer)
		add(pre+"FULL_CNT", dir.b.Full)
		add(pre+"REUSE_CNT", dir.b.Reuse)
		add(pre+"ALLOC_CNT", dir.b.Alloc)
		add(pre+"DGRADE_CNT", dir.b.Downgrade)
	}
	for _, kv := range []struct {
		k string
		v uint64
	}{
		{"SMC_CLNT_V1_SUCC_CNT", s.ClientV1}, {"SMC_CLNT_V2_SUCC_CNT", s.ClientV2},
		{"SMC_SRV_V1_SUCC_CNT", s.ServerV1}, {"SMC_SRV_V2_SUCC_CNT", s.ServerV2},
		{"SMC_SENDPAGE_CNT", 0}, {"SMC_URG_DATA_CNT", 0}, {"SMC_SPLICE_CNT", 0}, {"SMC_CORK_CNT", 0}, {"SMC_NDLY_CNT", 0},
		{"SMC_RX_BYTES", s.RxBytes}, {"SMC_TX_BYTES", s.TxBytes}, {"SMC_RX_CNT", s.RxCalls}, {"SMC_TX_CNT", s.TxCalls},
	} {
		add(kv.k, kv.v)
	}
	var b strings.Builder
	b.WriteString(`{"SMCR": {`)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		fmt.Fprintf(&b, "%s:%d", kb, vals[i])
	}
	b.WriteString("}}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
