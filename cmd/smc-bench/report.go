package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// point is the median over the repetitions of one workload, clients value
// and mode.
type point struct {
	Workload                               string
	Clients                                int
	Mode                                   string
	Reps                                   int
	RPS, P50, P99, Max                     float64
	CPU, User, Sys, Ctxsw, CompsPerWakeup  float64
	LoadCPU, SrvCPU                        float64 // µs per request of each process
	SMCConns, Conns, ServerSMC, LinkGroups int     // of the last repetition
	Errs                                   []string
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summarize takes the medians of every field over the repetitions.
func summarize(rs []*result) []*point {
	type key struct {
		w string
		c int
		m string
	}
	groups := map[key][]*result{}
	var order []key
	for _, r := range rs {
		k := key{r.Workload, r.Clients, r.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []*point
	for _, k := range order {
		g := groups[k]
		p := &point{Workload: k.w, Clients: k.c, Mode: k.m, Reps: len(g)}
		// A failed repetition (a fallback, an error, a hang) is no
		// measurement of its mode: it is reported, not counted.
		f := func(get func(*result) float64) float64 {
			var xs []float64
			for _, r := range g {
				if r.Requests > 0 && r.Err == "" {
					xs = append(xs, get(r))
				}
			}
			return median(xs)
		}
		p.RPS = f(func(r *result) float64 { return r.RPS })
		p.P50 = f(func(r *result) float64 { return r.P50 })
		p.P99 = f(func(r *result) float64 { return r.P99 })
		p.Max = f(func(r *result) float64 { return r.Max })
		p.CPU = f(func(r *result) float64 { return r.CPUPerReq() })
		p.User = f(func(r *result) float64 { return r.UserPerReq() })
		p.Sys = f(func(r *result) float64 { return r.SysPerReq() })
		p.Ctxsw = f(func(r *result) float64 { return r.CtxswPerReq() })
		p.CompsPerWakeup = f(func(r *result) float64 { return r.CompsPerWakeup() })
		p.LoadCPU = f(func(r *result) float64 { return r.perReq(r.LoadCPU.UserS + r.LoadCPU.SysS) })
		p.SrvCPU = f(func(r *result) float64 { return r.perReq(r.SrvCPU.UserS + r.SrvCPU.SysS) })
		last := g[len(g)-1]
		p.SMCConns = smcCount(last.ClientConns.ByMode)
		for _, v := range last.ClientConns.ByMode {
			p.Conns += v
		}
		p.ServerSMC = smcCount(last.ServerConns)
		p.LinkGroups = last.LinkGroups
		for _, r := range g {
			if r.Err != "" {
				p.Errs = append(p.Errs, fmt.Sprintf("rep %d: %s", r.Rep+1, r.Err))
			}
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Workload != out[j].Workload {
			return wlIndex(out[i].Workload) < wlIndex(out[j].Workload)
		}
		if out[i].Clients != out[j].Clients {
			return out[i].Clients < out[j].Clients
		}
		return modeIndex(out[i].Mode) < modeIndex(out[j].Mode)
	})
	return out
}

func smcCount(m map[string]int) int {
	n := 0
	for k, v := range m {
		if strings.HasPrefix(k, "SMC-R") {
			n += v
		}
	}
	return n
}

func wlIndex(w string) int {
	for i, x := range allWorkloads {
		if x == w {
			return i
		}
	}
	return len(allWorkloads)
}

func modeIndex(m string) int {
	for i, x := range allModes {
		if x == m {
			return i
		}
	}
	return len(allModes)
}

// find returns the point of a workload, clients value and mode, or nil.
func find(ps []*point, w string, c int, m string) *point {
	for _, p := range ps {
		if p.Workload == w && p.Clients == c && p.Mode == m {
			return p
		}
	}
	return nil
}

func rpsOf(p *point) float64 {
	if p == nil {
		return 0
	}
	return p.RPS
}

// vs formats x with its difference to base, as the original table does.
func vs(x, base float64) string {
	if x == 0 {
		return "-"
	}
	if base == 0 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.0f (%+.0f%%)", x, 100*(x-base)/base)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

var wlTitle = map[string]string{
	wlSet:   "redis-set: SET of a 3-byte value, go-redis clients (like redis-benchmark -t set)",
	wlGet:   "redis-get: GET of a 3-byte value, go-redis clients (like redis-benchmark -t get)",
	wlUperf: "uperf: 200-byte request, 1000-byte response (uperf rr1c-200x1000)",
}

// printTables writes, per workload, the original run's table (requests/s
// with the difference to TCP, pool vs TCP, pool vs original) and then what
// explains it.
func printTables(w io.Writer, ps []*point, header string) {
	fmt.Fprintln(w, header)
	var wls []string
	clientsOf := map[string][]int{}
	for _, p := range ps {
		if len(clientsOf[p.Workload]) == 0 {
			wls = append(wls, p.Workload)
		}
		cs := clientsOf[p.Workload]
		if len(cs) == 0 || cs[len(cs)-1] != p.Clients {
			clientsOf[p.Workload] = append(cs, p.Clients)
		}
	}
	for _, wl := range wls {
		fmt.Fprintf(w, "\n%s — requests/s (median)\n", wlTitle[wl])
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "clients\tTCP\tSMC original (udp)\tSMC cq_pool (udp)\tSMC original (shm)\tSMC cq_pool (shm)\tSMC cq_pool (shm, busy poll)\tpool vs TCP (udp)\tpool vs TCP (shm)\tbusy poll vs TCP\tpool vs original (udp)\tpool vs original (shm)\t")
		for _, c := range clientsOf[wl] {
			tcp := rpsOf(find(ps, wl, c, modeTCP))
			org := rpsOf(find(ps, wl, c, modeSMCOrg))
			cqp := rpsOf(find(ps, wl, c, modeSMCCQP))
			orgS := rpsOf(find(ps, wl, c, modeSMCOrgShm))
			cqpS := rpsOf(find(ps, wl, c, modeSMCCQPShm))
			busy := rpsOf(find(ps, wl, c, modeSMCCQPBusy))
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, vs(tcp, 0), vs(org, tcp), vs(cqp, tcp), vs(orgS, tcp), vs(cqpS, tcp), vs(busy, tcp),
				ratio(cqp, tcp), ratio(cqpS, tcp), ratio(busy, tcp), ratio(cqp, org), ratio(cqpS, orgS))
		}
		tw.Flush()
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "clients\tmode\trps\tp50 us\tp99 us\tmax us\tCPU us/req\tusr\tsys\tloadgen\tserver\tctxsw/req\tcomps/wakeup\tSMC-R conns client/server\tlink groups\t")
		for _, c := range clientsOf[wl] {
			for _, m := range allModes {
				p := find(ps, wl, c, m)
				if p == nil {
					continue
				}
				conns := fmt.Sprintf("%d/%d of %d", p.SMCConns, p.ServerSMC, c)
				if m == modeTCP {
					conns = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\t%s\t%d\t\n",
					c, m, p.RPS, p.P50, p.P99, p.Max, p.CPU, p.User, p.Sys, p.LoadCPU, p.SrvCPU, p.Ctxsw, p.CompsPerWakeup, conns, p.LinkGroups)
			}
		}
		tw.Flush()
	}
	var errs []string
	for _, p := range ps {
		for _, e := range p.Errs {
			errs = append(errs, fmt.Sprintf("FAILED %s c=%d %s %s", p.Workload, p.Clients, p.Mode, e))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintln(w)
		for _, e := range errs {
			fmt.Fprintln(w, e)
		}
	}
}

// csvHeader is the CSV header, exactly.
var csvHeader = []string{"workload", "clients", "mode", "rps", "p50_us", "p99_us", "cpu_us_per_req"}

func writeCSV(w io.Writer, ps []*point) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	for _, p := range ps {
		if err := cw.Write([]string{p.Workload, strconv.Itoa(p.Clients), p.Mode, f(p.RPS, 0), f(p.P50, 1), f(p.P99, 1), f(p.CPU, 2)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeSVG draws requests/s against clients (log scale), one line per
// mode, one panel per workload.
func writeSVG(w io.Writer, ps []*point, title string) error {
	const pw, ph, ml, mr, mt, mb = 420, 300, 70, 20, 40, 50
	var wls []string
	for _, p := range ps {
		if len(wls) == 0 || wls[len(wls)-1] != p.Workload {
			wls = append(wls, p.Workload)
		}
	}
	width := pw * max(len(wls), 1)
	height := ph + 60
	colors := map[string]string{modeTCP: "#555555", modeSMCOrg: "#d62728", modeSMCCQP: "#1f77b4", modeSMCOrgShm: "#ff9896", modeSMCCQPShm: "#17becf", modeSMCCQPBusy: "#2ca02c"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" text-anchor="middle" font-size="14">%s</text>`+"\n", width/2, esc(title))
	for i, wl := range wls {
		x0 := i * pw
		var cs []int
		ymax := 0.0
		for _, p := range ps {
			if p.Workload != wl {
				continue
			}
			if len(cs) == 0 || cs[len(cs)-1] != p.Clients {
				cs = append(cs, p.Clients)
			}
			ymax = math.Max(ymax, p.RPS)
		}
		if len(cs) == 0 || ymax == 0 {
			continue
		}
		ymax = niceCeil(ymax)
		lx0, lx1 := math.Log2(float64(cs[0])), math.Log2(float64(cs[len(cs)-1]))
		if lx1 == lx0 {
			lx1 = lx0 + 1
		}
		px := func(c int) float64 {
			return float64(x0+ml) + (math.Log2(float64(c))-lx0)/(lx1-lx0)*float64(pw-ml-mr)
		}
		py := func(v float64) float64 { return float64(mt+ph-mb) - v/ymax*float64(ph-mt-mb) + 20 }
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x0+pw/2, mt+10, esc(wl))
		// Axes, ticks and grid.
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", x0+ml, py(0), x0+pw-mr, py(0))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", x0+ml, py(0), x0+ml, py(ymax))
		for k := 0; k <= 4; k++ {
			v := ymax * float64(k) / 4
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", x0+ml, py(v), x0+pw-mr, py(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0+ml-4, py(v)+4, kilo(v))
		}
		for _, c := range cs {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", px(c), py(0)+16, c)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="middle">clients</text>`+"\n", x0+ml+(pw-ml-mr)/2, py(0)+32)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" transform="rotate(-90 %d %.1f)" text-anchor="middle">requests/s</text>`+"\n",
			x0+14, py(ymax/2), x0+14, py(ymax/2))
		for mi, m := range allModes {
			var pts []string
			for _, c := range cs {
				if p := find(ps, wl, c, m); p != nil && p.RPS > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(c), py(p.RPS)))
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(c), py(p.RPS), colors[m])
				}
			}
			if len(pts) > 0 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colors[m], strings.Join(pts, " "))
			}
			ly := mt + 24 + 16*mi
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`, x0+ml+10, ly, x0+ml+30, ly, colors[m])
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x0+ml+34, ly+4, m)
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func kilo(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func esc(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}

// readCSV reads the points of a CSV that writeCSV wrote (its columns only:
// the table it prints from them has no diagnostics).
func readCSV(r io.Reader) ([]*point, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || strings.Join(recs[0], ",") != strings.Join(csvHeader, ",") {
		return nil, fmt.Errorf("not an smc-bench CSV (header %q)", strings.Join(csvHeader, ","))
	}
	var ps []*point
	for i, rec := range recs[1:] {
		if len(rec) != len(csvHeader) {
			return nil, fmt.Errorf("line %d: %d fields", i+2, len(rec))
		}
		c, err := strconv.Atoi(rec[1])
		if err != nil || c < 1 {
			return nil, fmt.Errorf("line %d: bad clients %q", i+2, rec[1])
		}
		var v [4]float64
		for j := range v {
			if v[j], err = strconv.ParseFloat(rec[3+j], 64); err != nil || v[j] < 0 || math.IsInf(v[j], 0) {
				return nil, fmt.Errorf("line %d: bad number %q", i+2, rec[3+j])
			}
		}
		ps = append(ps, &point{Workload: rec[0], Clients: c, Mode: rec[2], RPS: v[0], P50: v[1], P99: v[2], CPU: v[3]})
	}
	return ps, nil
}
