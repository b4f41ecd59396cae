package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// vsTCP formats x relative to the TCP baseline, as the seed's table does.
func vsTCP(x, tcp float64) string {
	if tcp == 0 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.0f (%+.0f%%)", x, 100*(x-tcp)/tcp)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// printTable writes the seed-shaped table (clients, TCP, legacy and pooled
// with their difference to TCP) followed by the diagnostics columns.
func printTable(w io.Writer, rows []row, d string) {
	var tw *tabwriter.Writer
	shape := ""
	for _, r := range rows {
		if r.Shape != shape || tw == nil {
			if tw != nil {
				tw.Flush()
				fmt.Fprintln(w)
			}
			shape = r.Shape
			fmt.Fprintf(w, "shape %s, %s per measurement\n", describe(shape), d)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "clients\tTCP tps\tlegacy tps (vs TCP)\tpooled tps (vs TCP)\tpooled/legacy\tlegacy-rtc tps\tpooled/legacy-rtc\t"+
				"comps/wakeup legacy\tpooled\tno-DIM\tCPU s/Mcomp legacy\tlegacy-rtc\tpooled\tp50 us legacy\tlegacy-rtc\tpooled\tno-DIM\tTCP\tp99 us legacy\tpooled\tno-DIM\tTCP\t")
		}
		tcp, leg, lrtc, pool, nd := r.Res["tcp"], r.Res["legacy"], r.Res["legacy-rtc"], r.Res["pooled"], r.Res["nodim"]
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n",
			r.Clients, tcp.TPS, vsTCP(leg.TPS, tcp.TPS), vsTCP(pool.TPS, tcp.TPS), ratio(pool.TPS, leg.TPS),
			lrtc.TPS, ratio(pool.TPS, lrtc.TPS),
			leg.CompsPerWakeup(), pool.CompsPerWakeup(), nd.CompsPerWakeup(),
			leg.CPUPerMComp(), lrtc.CPUPerMComp(), pool.CPUPerMComp(),
			leg.P50, lrtc.P50, pool.P50, nd.P50, tcp.P50, leg.P99, pool.P99, nd.P99, tcp.P99)
	}
	if tw != nil {
		tw.Flush()
	}
	for _, r := range rows {
		for mode, res := range r.Res {
			if res.Err != "" {
				fmt.Fprintf(w, "note: %s c=%d %s: %s\n", r.Shape, r.Clients, mode, res.Err)
			}
		}
	}
}

// csvHeader names the CSV columns; the first ones are the issue's.
var csvHeader = []string{
	"clients", "tcp_tps", "legacy_tps", "pooled_tps", "pooled_wakeups_per_1k_comps", "pooled_p50_us", "pooled_p99_us",
	"shape", "req_bytes", "resp_bytes", "pooled_over_legacy",
	"legacy_comps_per_wakeup", "pooled_comps_per_wakeup",
	"legacy_cpu_s_per_mcomp", "pooled_cpu_s_per_mcomp",
	"legacy_p50_us", "legacy_p99_us", "tcp_p50_us", "tcp_p99_us",
	"nodim_tps", "nodim_wakeups_per_1k_comps", "nodim_p50_us", "nodim_p99_us", "nodim_cpu_s_per_mcomp",
	"legacy_rtc_tps", "pooled_over_legacy_rtc", "legacy_rtc_cpu_s_per_mcomp", "legacy_rtc_p50_us", "legacy_rtc_p99_us",
	"errors",
}

func writeCSV(w io.Writer, rows []row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
	for _, r := range rows {
		tcp, leg, lrtc, pool, nd := r.Res["tcp"], r.Res["legacy"], r.Res["legacy-rtc"], r.Res["pooled"], r.Res["nodim"]
		s := shapeByName(r.Shape)
		rec := []string{
			strconv.Itoa(r.Clients), f(tcp.TPS), f(leg.TPS), f(pool.TPS), f(pool.WakeupsPer1k()), f(pool.P50), f(pool.P99),
			r.Shape, strconv.Itoa(s.req), strconv.Itoa(s.resp), f(ratio(pool.TPS, leg.TPS)),
			f(leg.CompsPerWakeup()), f(pool.CompsPerWakeup()),
			f(leg.CPUPerMComp()), f(pool.CPUPerMComp()),
			f(leg.P50), f(leg.P99), f(tcp.P50), f(tcp.P99),
			f(nd.TPS), f(nd.WakeupsPer1k()), f(nd.P50), f(nd.P99), f(nd.CPUPerMComp()),
			f(lrtc.TPS), f(ratio(pool.TPS, lrtc.TPS)), f(lrtc.CPUPerMComp()), f(lrtc.P50), f(lrtc.P99),
			errs(r),
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// errs joins the failures of a row's measurements.
func errs(r row) string {
	var out []string
	for _, mode := range []string{"tcp", "legacy", "legacy-rtc", "pooled", "nodim"} {
		if e := r.Res[mode].Err; e != "" {
			out = append(out, mode+": "+e)
		}
	}
	return strings.Join(out, "; ")
}
