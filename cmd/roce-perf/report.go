package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/goroce/goroce/rocev2/device"
)

// perftest's strings (perftest_parameters.h), byte for byte, so that
// scripts that parse perftest output parse ours.
const (
	resultLine   = "---------------------------------------------------------------------------------------"
	resultFmt    = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	reportFmt    = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f\n"
	resultFmtLat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	reportFmtLat = " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n"
)

// result is one test's outcome, as -json prints it.
type result struct {
	Test      string        `json:"test"`
	Size      int           `json:"size"`
	MTU       int           `json:"mtu"`
	TxDepth   int           `json:"tx_depth,omitempty"`
	CQMod     int           `json:"cq_mod,omitempty"`
	GoRoCE    *bwStats      `json:"goroce,omitempty"`
	Raw       *bwStats      `json:"raw_udp,omitempty"`
	GoRoCELat *latStats     `json:"goroce_lat,omitempty"`
	RawLat    *latStats     `json:"raw_udp_lat,omitempty"`
	Ratio     float64       `json:"ratio,omitempty"` // goroce/raw: Gbit/s, or t_typical for latency
	Wait      string        `json:"wait,omitempty"`  // latency: how both sides waited, "busy-poll" or "events"
	GSO       bool          `json:"gso"`
	GRO       bool          `json:"gro"`
	Counters  []counter     `json:"counters,omitempty"` // the client device's counters that moved
	Demo      []demoOutcome `json:"demo,omitempty"`
}

// counter is a device counter's change over a test.
type counter struct {
	Name  string `json:"name"`
	Delta uint64 `json:"delta"`
}

// counterDelta returns the counters that changed between two snapshots.
func counterDelta(before, after []device.Counter) []counter {
	var out []counter
	for i, c := range after {
		if i < len(before) && c.Value != before[i].Value {
			out = append(out, counter{c.Name, c.Value - before[i].Value})
		}
	}
	return out
}

// testTitle is perftest's banner title of a test.
func testTitle(kind string) string {
	switch kind {
	case kindWrite:
		return "RDMA_Write BW Test"
	case kindSend:
		return "Send BW Test"
	case kindRead:
		return "RDMA_Read BW Test"
	case kindLat:
		return "Send Latency Test"
	case kindUD:
		return "Send BW Test"
	}
	return "RC operations demo"
}

// printBanner prints perftest's test banner and both address records.
func printBanner(w io.Writer, dev string, sp *testSpec, local, remote *endpoint) {
	fmt.Fprintln(w, resultLine)
	fmt.Fprintf(w, "                    %s\n", testTitle(sp.Kind))
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", dev)
	fmt.Fprintf(w, " Number of qps   : 1\t\tTransport type : IB\n")
	conn := "RC"
	if sp.Kind == kindUD {
		conn = "UD"
	}
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : OFF\n", conn)
	fmt.Fprintf(w, " TX depth        : %d\n", sp.TxDepth)
	if sp.Kind != kindLat && sp.Kind != kindDemo {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", sp.CQMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", sp.MTU)
	fmt.Fprintf(w, " Link type       : Ethernet\n")
	fmt.Fprintf(w, " GID index       : 1\n")
	if sp.Kind == kindRead {
		fmt.Fprintf(w, " Outstand reads  : %d\n", maxRdAtomic)
	} else {
		inline := 0
		if sp.Kind == kindLat && sp.Size <= maxInline {
			inline = maxInline
		}
		fmt.Fprintf(w, " Max inline data : %d[B]\n", inline)
	}
	fmt.Fprintf(w, " rdma_cm QPs\t : OFF\n")
	fmt.Fprintf(w, " Data ex. method : Ethernet\n")
	fmt.Fprintln(w, resultLine)
	printAddress(w, "local", local)
	printAddress(w, "remote", remote)
	fmt.Fprintln(w, resultLine)
}

// printAddress prints an address record the way perftest does, the GID's
// bytes in decimal.
func printAddress(w io.Writer, side string, ep *endpoint) {
	// C's %#06x counts the 0x in the width; Go's does not.
	fmt.Fprintf(w, " %s address: LID 0000 QPN 0x%04x PSN 0x%04x RKey 0x%06x VAddr 0x%014x\n", side, ep.QPN, ep.PSN, ep.RKey, ep.VA)
	var b strings.Builder
	for i := 0; i+2 <= len(ep.GID); i += 2 {
		var v byte
		fmt.Sscanf(ep.GID[i:i+2], "%02x", &v)
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02d", v)
	}
	fmt.Fprintf(w, " GID: %s\n", b.String())
}

// printBW prints a bandwidth row under perftest's header.
func printBW(w io.Writer, size int, s *bwStats) {
	fmt.Fprintln(w, resultFmt)
	fmt.Fprintf(w, reportFmt, size, s.Msgs, s.PeakMBs, s.AvgMBs, s.MsgRateMpps)
}

// printLat prints a latency row under perftest's header.
func printLat(w io.Writer, size int, s *latStats) {
	fmt.Fprintln(w, resultFmtLat)
	fmt.Fprintf(w, reportFmtLat, size, s.Iters, s.TMin, s.TMax, s.TTypical, s.TAvg, s.TStdev, s.P99, s.P999)
}

// offloads describes the batching the baseline copied from goroce.
func offloads(gso, gro bool) string {
	s := "sendmmsg/recvmmsg x64"
	if gso {
		s += ", GSO"
	}
	if gro {
		s += ", GRO"
	}
	return s
}

// printResult prints a test's tables: goroce, then the raw baseline and
// the ratio.
func printResult(w io.Writer, r *result) {
	switch {
	case r.GoRoCE != nil:
		printBW(w, r.Size, r.GoRoCE)
		fmt.Fprintln(w, resultLine)
		fmt.Fprintf(w, " goroce %s: %.2f Gbit/s average, %.2f Gbit/s peak\n", r.Test, r.GoRoCE.Gbits, r.GoRoCE.PeakGbits)
		if r.Test == kindUD {
			fmt.Fprintf(w, " UD SENDs of %d B, window %d, ack every %d: %d sent, %d lost\n", r.Size, rawWindow, rawAckEvery, r.GoRoCE.Packets, r.GoRoCE.Lost)
		}
		if r.Raw != nil {
			seg, perMsg := rawShape(r.Size, r.MTU)
			fmt.Fprintf(w, " raw UDP baseline (%s, %d x %d B datagrams per message, window %d, ack every %d):\n",
				offloads(r.GSO, r.GRO), perMsg, seg, rawWindow, rawAckEvery)
			printBW(w, r.Size, r.Raw)
			fmt.Fprintln(w, resultLine)
			fmt.Fprintf(w, " raw UDP: %.2f Gbit/s average (%d datagrams, %d lost); goroce/raw %.2f\n", r.Raw.Gbits, r.Raw.Packets, r.Raw.Lost, r.Ratio)
		}
	case r.GoRoCELat != nil:
		printLat(w, r.Size, r.GoRoCELat)
		fmt.Fprintln(w, resultLine)
		if r.RawLat != nil {
			how := "blocking socket"
			if r.Wait == waitBusy {
				how = "busy-polled socket, as goroce's CQ"
			}
			fmt.Fprintf(w, " raw UDP baseline (%d B ping-pong, %s):\n", r.Size, how)
			printLat(w, r.Size, r.RawLat)
			fmt.Fprintln(w, resultLine)
			fmt.Fprintf(w, " t_typical goroce %.2f usec, raw UDP %.2f usec; goroce/raw %.2f\n", r.GoRoCELat.TTypical, r.RawLat.TTypical, r.Ratio)
		}
	}
	if len(r.Counters) > 0 {
		var parts []string
		for _, c := range r.Counters {
			parts = append(parts, fmt.Sprintf("%s +%d", c.Name, c.Delta))
		}
		fmt.Fprintf(w, " client counters: %s\n", strings.Join(parts, ", "))
	}
}

// summaryLine is the one-line digest of a result.
func summaryLine(r *result) string {
	switch {
	case r.GoRoCE != nil && r.Raw != nil:
		return fmt.Sprintf("%s %dB: goroce %.2f Gbit/s, raw UDP %.2f Gbit/s, ratio %.2f", r.Test, r.Size, r.GoRoCE.Gbits, r.Raw.Gbits, r.Ratio)
	case r.GoRoCE != nil:
		return fmt.Sprintf("%s %dB: goroce %.2f Gbit/s", r.Test, r.Size, r.GoRoCE.Gbits)
	case r.GoRoCELat != nil && r.RawLat != nil:
		return fmt.Sprintf("%s %dB: goroce %.2f usec, raw UDP %.2f usec (t_typical, one-way), ratio %.2f", r.Test, r.Size, r.GoRoCELat.TTypical, r.RawLat.TTypical, r.Ratio)
	case r.GoRoCELat != nil:
		return fmt.Sprintf("%s %dB: goroce %.2f usec (t_typical, one-way)", r.Test, r.Size, r.GoRoCELat.TTypical)
	case r.Demo != nil:
		ok := 0
		for _, d := range r.Demo {
			if d.OK {
				ok++
			}
		}
		return fmt.Sprintf("demo: %d of %d operation types verified", ok, len(r.Demo))
	}
	return r.Test
}

// report is what -json prints.
type report struct {
	Role    string   `json:"role"`
	Device  string   `json:"device"`
	Local   string   `json:"local"`
	Peer    string   `json:"peer"`
	Results []result `json:"results"`
}

func printJSON(w io.Writer, rep *report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
