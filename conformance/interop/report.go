//go:build linux

package main

// The report: a table per guest, the time of each part, and what the
// programs said for every failure, retry, skip and note.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report prints a table per guest, the time of each part, and for each
// failure (and retry, skip or note) what the programs said.
func (h *harness) report(w io.Writer, res []*result, wall time.Duration) {
	var sb strings.Builder
	accel := "TCG"
	if h.kvm {
		accel = "KVM"
	}
	pass, fail, flaky, skipped := 0, 0, 0, 0
	for _, r := range res {
		switch {
		case r.skipped:
			skipped++
		case r.pass:
			pass++
		default:
			fail++
		}
		if r.pass && r.firstTry != nil {
			flaky++
		}
	}
	for _, g := range h.guests {
		var rows []int
		for i, r := range res {
			if r.on == g.kind {
				rows = append(rows, i)
			}
		}
		if len(rows) == 0 {
			continue
		}
		switch g.kind {
		case smcGuest:
			fmt.Fprintf(&sb, "goroce interop, SMC-R: guest kernel %s (smc, rdma_rxe) under QEMU/%s; goroce on %s; UEID %s, pnet %s\n\n", g.release, accel, hostIP, InteropUEID, InteropPnetID)
			smcTable(&sb, res, rows)
		default:
			fmt.Fprintf(&sb, "goroce interop, verbs (RC, UC, UD, SRQ; rdma-core and perftest): guest kernel %s (rdma_rxe) under QEMU/%s; goroce on %s\n\n", g.release, accel, hostIP)
			rcTable(&sb, res, rows)
		}
		sb.WriteString("\n")
	}
	fmt.Fprintf(&sb, "%d passed, %d failed", pass, fail)
	if skipped > 0 {
		fmt.Fprintf(&sb, ", %d skipped", skipped)
	}
	sb.WriteString("\n")
	if flaky > 0 {
		fmt.Fprintf(&sb, "(%d of the passed are FLAKY: failed once, passed when run again; see below)\n", flaky)
	}
	garbled := 0
	if h.vm != nil {
		garbled = h.vm.garbled
	}
	fmt.Fprintf(&sb, "wall time %.0fs (guest boots: %d, job lines resent: %d); captures and outputs in %s\n", wall.Seconds(), h.boots, garbled, h.out)
	for _, g := range h.guests {
		cached := "built"
		if g.imageCached {
			cached = "cached"
		}
		fmt.Fprintf(&sb, "  %s guest %s: image %.1fs (%s), boot and setup %.1fs, %d cases %.1fs\n",
			g.kind, g.release, g.imageDur.Seconds(), cached, g.bootDur.Seconds(), len(g.cases), g.casesDur.Seconds())
	}
	fmt.Fprintf(&sb, "(row 0 of each guest is its own check: rdma-core's rc_pingpong against itself on rxe0; its 'goroce' columns are the client's)\n")
	for _, r := range res {
		if r.raced {
			fmt.Fprintf(&sb, "(PASS*: lost to rc_pingpong's end race, not to the transport: see the note below and conformance/interop/README.md)\n")
			break
		}
	}
	fmt.Fprintf(&sb, "(iters: rxe/goroce when they differ; retrans and PSN NAKs: rocedump -stats of the case's capture, both directions)\n")
	for i, r := range res {
		if r.pass && len(r.notes) == 0 && !strings.Contains(r.dir, "loopback") && r.firstTry == nil {
			continue
		}
		if r.skipped && i > 0 && res[i-1].skipped && res[i-1].skipWhy == r.skipWhy {
			continue // one note for a run of cases skipped alike
		}
		fmt.Fprintf(&sb, "\n--- #%d %s, %s: %s\n", i, r.name, r.dir, r.verdict())
		if r.skipped {
			fmt.Fprintf(&sb, "  skipped: %s (and the cases after it that say the same)\n", r.skipWhy)
			continue
		}
		if f := r.firstTry; f != nil {
			fmt.Fprintf(&sb, "  first attempt: FAIL (%.1fs): %s\n", f.dur.Seconds(), strings.Join(f.reasons, "; "))
			if len(f.counters) > 0 {
				fmt.Fprintf(&sb, "    rxe0 counters: %s\n", formatCounters(f.counters))
			}
			fmt.Fprintf(&sb, "    files: %s.*\n", f.files)
			fmt.Fprintf(&sb, "    rxe side, exit %d:\n%s\n", f.guestRC, indent(indent(tail(f.guestOut, 6))))
			fmt.Fprintf(&sb, "    goroce side, exit %d:\n%s\n", f.goroceRC, indent(indent(tail(f.goroceOut, 6))))
		}
		for _, x := range r.reasons {
			fmt.Fprintf(&sb, "  failure: %s\n", x)
		}
		for _, x := range r.notes {
			fmt.Fprintf(&sb, "  note: %s\n", x)
		}
		if len(r.counters) > 0 {
			fmt.Fprintf(&sb, "  rxe0 counters: %s\n", formatCounters(r.counters))
		}
		if r.smc != nil && len(r.smc.delta) > 0 {
			fmt.Fprintf(&sb, "  kernel SMC statistics, change: %s\n", formatCounters(r.smc.delta))
		}
		if r.pass {
			continue
		}
		if r.files != "" {
			fmt.Fprintf(&sb, "  files: %s.*\n", r.files)
		}
		fmt.Fprintf(&sb, "  kernel side (guest), exit %d:\n%s\n", r.guestRC, indent(tail(r.guestOut, 15)))
		fmt.Fprintf(&sb, "  goroce side, exit %d:\n%s\n", r.goroceRC, indent(tail(r.goroceOut, 15)))
		if r.cap != nil {
			fmt.Fprintf(&sb, "  rocedump -stats:\n%s\n", indent(r.cap.stats))
		}
	}
	if fail > 0 && h.lastConsole != "" {
		fmt.Fprintf(&sb, "\n--- guest console (last lines) ---\n%s\n", h.lastConsole)
	}
	io.WriteString(w, sb.String())
	if h.out != "" {
		os.WriteFile(filepath.Join(h.out, "summary.txt"), []byte(sb.String()), 0o644)
	}
}

// rcTable prints the verbs cases' table.
func rcTable(sb *strings.Builder, res []*result, rows []int) {
	tw := tabwriter.NewWriter(sb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tcase\tdirection\tresult\titers\trxe Mbit/s\trxe µs/iter\tgoroce Mbit/s\tgoroce µs/iter\tRoCE pkts rxe/goroce\tretrans\tPSN NAKs\ttime")
	for _, i := range rows {
		r := res[i]
		pk, retx, naks := "-", "-", "-"
		if r.cap != nil {
			pk = fmt.Sprintf("%d/%d", r.cap.bySrc[guestIP], r.cap.bySrc[hostIP])
			retx, naks = strconv.Itoa(r.cap.retrans), strconv.Itoa(r.cap.psnNAKs)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1fs\n", i, r.name, r.dir, r.verdict(), itersCol(r),
			num(r.guest.ok, r.guest.mbits), num(r.guest.ok, r.guest.usecIter), num(r.goroce.ok, r.goroce.mbits), num(r.goroce.ok, r.goroce.usecIter),
			pk, retx, naks, r.dur.Seconds())
	}
	tw.Flush()
}

// smcTable prints the SMC-R cases' table: what the guest kernel's own
// statistics counted, and the wire.
func smcTable(sb *strings.Builder, res []*result, rows []int) {
	tw := tabwriter.NewWriter(sb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tcase\tdirection\tresult\tSMC-R conns clnt/srv\tkernel tx/rx bytes\tfallbacks\tRoCE pkts kernel/goroce\tretrans\ttime")
	for _, i := range rows {
		r := res[i]
		conns, bytes, fb := "-", "-", "-"
		if o := r.smc; o != nil && o.delta != nil {
			d := o.delta
			conns = fmt.Sprintf("%d/%d", d.smcrConns("clnt"), d.smcrConns("srv"))
			bytes = fmt.Sprintf("%d/%d", d["smcr.tx_bytes"], d["smcr.rx_bytes"])
			fb = strconv.FormatInt(d["fallback.srv_cnt"]+d["fallback.clnt_cnt"], 10)
		}
		pk, retx := "-", "-"
		if r.cap != nil {
			pk = fmt.Sprintf("%d/%d", r.cap.bySrc[guestIP], r.cap.bySrc[hostIP])
			retx = strconv.Itoa(r.cap.retrans)
		}
		if r.smc == nil { // row 0: rc_pingpong on the guest's rxe0
			pk = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1fs\n", i, r.name, r.dir, r.verdict(), conns, bytes, fb, pk, retx, r.dur.Seconds())
	}
	tw.Flush()
}

func itersCol(r *result) string {
	switch {
	case r.reps > 0:
		return "-" // repeated: the result column has the runs

	case r.guest.ok && r.goroce.ok && r.guest.iters == r.goroce.iters:
		return strconv.Itoa(r.guest.iters)
	case r.guest.ok || r.goroce.ok:
		side := func(p perf) string {
			if !p.ok {
				return "-"
			}
			return strconv.Itoa(p.iters)
		}
		return side(r.guest) + "/" + side(r.goroce)
	}
	return fmt.Sprintf("-/%d", r.iters)
}

func num(ok bool, f float64) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
