//go:build linux

package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// perftest's result tables (perftest_parameters.h: RESULT_FMT, RESULT_FMT_G,
// RESULT_FMT_LAT, RESULT_FMT_LAT_DUR), each header followed by one row per
// message size.
var (
	perftestBWHead     = regexp.MustCompile(`^ #bytes\s+#iterations\s+BW peak\[(MB|Gb)/sec\]\s+BW average\[(?:MB|Gb)/sec\]\s+MsgRate\[Mpps\]`)
	perftestLatHead    = regexp.MustCompile(`^ #bytes\s+#iterations\s+t_min\[usec\]\s+t_max\[usec\]\s+t_typical\[usec\]\s+t_avg\[usec\]`)
	perftestLatDurHead = regexp.MustCompile(`^ #bytes\s+#iterations\s+t_avg\[usec\]\s+tps average`)
	perftestRow        = regexp.MustCompile(`^ (\d+)\s+(\d+)((?:\s+(?:[0-9.]+|-?inf|-?nan))+)\s*$`)
	// perftestNoClock is what perftest prints when it cannot calibrate its
	// cycle counter against gettimeofday (get_clock.c: a regression over
	// 200 samples, r² under 0.9 under an uneven clock such as QEMU/TCG's
	// on a busy host): it then divides by 0 MHz, and every time is inf.
	perftestNoClock = regexp.MustCompile(`Correlation coefficient r\^2: [0-9.eE+-]+ < 0\.9`)
)

// perftestNotes says what is worth knowing in one side's output.
func perftestNotes(who, out string) []string {
	if m := perftestNoClock.FindString(out); m != "" {
		return []string{fmt.Sprintf("%s's perftest could not calibrate its clock (%q), so its times read inf: its iterations still count", who, m)}
	}
	return nil
}

// parsePerftest reads a perftest program's table: the last row of the last
// table (one per size; the cases run one size); perftest's inf and nan
// (a clock it could not calibrate) are read as such. Bandwidth goes to mbits
// (perftest's MB are MiB), a BW table's message rate to usecIter as µs per
// message, a latency table's t_avg to usecIter. A table without a row,
// or none at all, is not ok.
func parsePerftest(out string) perf {
	var p perf
	kind := ""
	gbits := false
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		switch {
		case perftestBWHead.MatchString(l):
			kind, gbits = "bw", perftestBWHead.FindStringSubmatch(l)[1] == "Gb"
			continue
		case perftestLatHead.MatchString(l):
			kind = "lat"
			continue
		case perftestLatDurHead.MatchString(l):
			kind = "latdur"
			continue
		}
		m := perftestRow.FindStringSubmatch(l)
		if kind == "" || m == nil {
			continue
		}
		size, err1 := strconv.ParseInt(m[1], 10, 64)
		iters, err2 := strconv.Atoi(m[2])
		vals := strings.Fields(m[3])
		nums := make([]float64, len(vals))
		bad := err1 != nil || err2 != nil
		for i, v := range vals {
			if v == "-nan" { // C's printf of a NaN with its sign bit set
				nums[i] = math.NaN()
				continue
			}
			var err error
			if nums[i], err = strconv.ParseFloat(v, 64); err != nil {
				bad = true
			}
		}
		want := map[string]int{"bw": 3, "lat": 7, "latdur": 2}[kind]
		if bad || len(nums) < want {
			continue
		}
		p = perf{ok: true, bytes: size * int64(iters), iters: iters}
		switch kind {
		case "bw":
			avg, rate := nums[1], nums[2]
			if gbits {
				p.mbits = avg * 1000
			} else {
				p.mbits = avg * (1 << 20) * 8 / 1e6
			}
			if rate > 0 {
				p.usecIter = 1 / rate
			}
		case "lat":
			p.usecIter = nums[3]
		case "latdur":
			p.usecIter = nums[0]
		}
		if p.usecIter > 0 {
			p.secs = p.usecIter * float64(iters) / 1e6
		}
	}
	return p
}
