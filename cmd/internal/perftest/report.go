package perftest

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/goroce/goroce/rocev2"
)

// resultLine is perftest's RESULT_LINE.
var resultLine = strings.Repeat("-", 87) + "\n"

// perftest's table headers (RESULT_FMT, RESULT_FMT_G, RESULT_FMT_LAT,
// RESULT_FMT_LAT_DUR), each followed by RESULT_EXT, a newline.
const (
	resultFmt       = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	resultFmtG      = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	resultFmtLat    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	resultFmtLatDur = " #bytes        #iterations       t_avg[usec]    tps average"
)

// cHex is C's "%#0<width>x": "0x" and the digits, zero-padded to width
// characters in all; zero alone is printed without the prefix, as width
// zeros.
func cHex(v uint64, width int) string {
	if v == 0 {
		return strings.Repeat("0", max(width, 1))
	}
	digits := strconv.FormatUint(v, 16)
	if pad := width - 2 - len(digits); pad > 0 {
		digits = strings.Repeat("0", pad) + digits
	}
	return "0x" + digits
}

// cFloat is C's "%-<width>.<prec>f", which prints infinities and NaN as
// "inf", "-inf" and "nan" where Go's %f prints "+Inf" and "NaN".
func cFloat(v float64, width, prec int) string {
	var s string
	switch {
	case math.IsInf(v, 1):
		s = "inf"
	case math.IsInf(v, -1):
		s = "-inf"
	case math.IsNaN(v):
		s = "nan"
	default:
		s = strconv.FormatFloat(v, 'f', prec, 64)
	}
	if pad := width - len(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// cG is C's "%g".
func cG(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case math.IsNaN(v):
		return "nan"
	}
	return fmt.Sprintf("%.6g", v)
}

// printTestInfo is ctx_print_test_info.
func (p *params) printTestInfo(w io.Writer, mtu rocev2.MTU) {
	fmt.Fprint(w, resultLine)
	fmt.Fprintf(w, "                    %s ", verbNames[p.t.verb])
	if p.t.verb == Atomic {
		fmt.Fprintf(w, "%s ", atomicNames[p.atomic])
	}
	if p.t.kind == BW {
		fmt.Fprint(w, "BW ")
	} else {
		fmt.Fprint(w, "Latency ")
	}
	fmt.Fprint(w, "Test\n")
	if p.events {
		fmt.Fprintf(w, " Test with events. Using %s_comp%d\n", deviceName, 0)
	}
	fmt.Fprintf(w, " Dual-port       : %s\t\tDevice         : %s\n", "OFF", deviceName)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : %s\n", p.numQPs, "IB")
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : %s\n", connNames[p.conn], "OFF")
	fmt.Fprintf(w, " PCIe relax order: %s\n", "ON")
	fmt.Fprintf(w, " ibv_wr* API     : %s\n", "OFF")
	if p.isClient() {
		fmt.Fprintf(w, " TX depth        : %d\n", p.txDepth)
	}
	if p.t.verb == Send && !p.isClient() {
		fmt.Fprintf(w, " RX depth        : %d\n", p.rxDepth)
	}
	if p.t.kind == BW {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", p.cqMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", mtu.Bytes())
	fmt.Fprintf(w, " Link type       : %s\n", "Ethernet")
	fmt.Fprintf(w, " GID index       : %d\n", p.gidIndex)
	if p.t.verb != Read && p.t.verb != Atomic {
		fmt.Fprintf(w, " Max inline data : %d[B]\n", p.inline)
	} else {
		fmt.Fprintf(w, " Outstand reads  : %d\n", p.outReads)
	}
	fmt.Fprintf(w, " rdma_cm QPs\t : %s\n", map[bool]string{false: "OFF", true: "ON"}[p.workCM])
	fmt.Fprintf(w, " Data ex. method : %s\n", map[bool]string{false: "Ethernet", true: "rdma_cm"}[p.useCM])
	if p.workCM && !p.isClient() {
		fmt.Fprint(w, resultLine+" Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP\n")
	}
	fmt.Fprint(w, resultLine)
}

// printDest is ctx_print_pingpong_data: a QP's address line, and its GID
// in decimal.
func (p *params) printDest(w io.Writer, side string, d *dest) {
	fmt.Fprintf(w, " %s address: LID %s QPN %s PSN %s", side, cHex(uint64(d.lid), 4), cHex(uint64(d.qpn), 6), cHex(uint64(d.psn), 6))
	switch p.t.verb {
	case Read:
		fmt.Fprintf(w, " OUT %s", cHex(uint64(d.outReads), 4))
		fallthrough
	case Write:
		fmt.Fprintf(w, " RKey %s VAddr %s", cHex(uint64(d.rkey), 8), cHex(d.vaddr, 16))
	}
	fmt.Fprint(w, "\n")
	fmt.Fprint(w, " GID: ")
	for i, b := range d.gid {
		if i > 0 {
			fmt.Fprint(w, ":")
		}
		fmt.Fprintf(w, "%02d", b)
	}
	fmt.Fprint(w, "\n")
}

// printBWHeader prints the BW table's header.
func (p *params) printBWHeader(w io.Writer) {
	fmt.Fprint(w, resultLine)
	if p.gbits {
		fmt.Fprint(w, resultFmtG)
	} else {
		fmt.Fprint(w, resultFmt)
	}
	fmt.Fprint(w, "\n")
}

// printLatHeader prints the latency table's header.
func (p *params) printLatHeader(w io.Writer) {
	fmt.Fprint(w, resultLine)
	if p.duration > 0 {
		fmt.Fprint(w, resultFmtLatDur)
	} else {
		fmt.Fprint(w, resultFmtLat)
	}
	fmt.Fprint(w, "\n")
}

// nsPerSec is cycles_to_units of the BW report: the clock counts
// nanoseconds where perftest counts CPU cycles.
const nsPerSec = 1e9

// bwReport computes print_report_bw's numbers from a run's times: the
// average over the whole run, and unless noPeak the peak, the best rate of
// any stretch of consecutive messages (times in unsigned arithmetic, as
// perftest's cycles_t: completions a moderated run never timed read as
// zero and so never win).
func (c *ctx) bwReport(iters int) bwReport {
	p := c.p
	n := iters
	if p.duration == 0 {
		n = iters * p.numQPs
	}
	tp, tc := c.tposted, c.tcompleted
	optDelta := uint64(tc[0] - tp[0])
	if !p.noPeak {
		for i := range n {
			for j := i; j < n; j++ {
				if t := uint64(tc[j]-tp[i]) / uint64(j-i+1); t < optDelta {
					optDelta = t
				}
			}
		}
	}
	loc := n - 1
	if p.noPeak {
		loc = 0
	}
	format := float64(0x100000)
	if p.gbits {
		format = 125000000
	}
	sum := float64(uint64(tc[loc] - tp[0]))
	size := float64(p.size)
	r := bwReport{
		size:    uint64(p.size),
		iters:   uint64(n),
		bwAvg:   size * float64(n) * nsPerSec / (sum * format),
		msgRate: float64(n) * nsPerSec / (sum * 1000000),
	}
	var peakUp uint64
	if !p.noPeak {
		peakUp = uint64(p.size) * uint64(nsPerSec)
	}
	r.bwPeak = float64(peakUp) / (float64(optDelta) * format)
	return r
}

// printBWReport is print_full_bw_report of one side's numbers.
func (p *params) printBWReport(w io.Writer, r *bwReport) {
	if p.gbits && r.bwAvg < 0.1 {
		// REPORT_FMT_EXT: more digits for small rates.
		fmt.Fprintf(w, " %-7d    %d           %s            %s            %s",
			r.size, r.iters, cFloat(r.bwPeak, 7, 6), cFloat(r.bwAvg, 7, 6), cFloat(r.msgRate, 7, 6))
	} else {
		fmt.Fprintf(w, " %-7d    %-10d       %s            %s\t\t   %s",
			r.size, r.iters, cFloat(r.bwPeak, 7, 2), cFloat(r.bwAvg, 7, 2), cFloat(r.msgRate, 7, 6))
	}
	fmt.Fprint(w, "\n")
}

// printLatReport is print_report_lat: the spread of the times between
// consecutive posts, halved for SEND and WRITE (a round trip each), the
// two largest left out; the standard deviation with perftest's integer
// truncations.
func (c *ctx) printLatReport(w io.Writer) {
	p := c.p
	n := p.iters - 1
	rtt := 2.0
	if p.t.verb == Read || p.t.verb == Atomic {
		rtt = 1
	}
	delta := make([]uint64, n)
	for i := range delta {
		delta[i] = uint64(c.tposted[i+1] - c.tposted[i])
	}
	q := 1000 * rtt // cycles_to_units (ns per usec) times the RTT factor
	if p.unsorted {
		fmt.Fprintf(w, "#, %s\n", "usec")
		for i, d := range delta {
			fmt.Fprintf(w, "%d, %s\n", i+1, cG(float64(d)/q))
		}
	}
	slices.Sort(delta)
	n -= 2 // LAT_MEASURE_TAIL
	var median uint64
	if (n-1)%2 != 0 {
		median = (delta[n/2] + delta[n/2-1]) / 2
	} else {
		median = delta[n/2]
	}
	var sum float64
	for _, d := range delta[:n] {
		sum += float64(d) / q
	}
	avg := sum / float64(n)
	var stdevSum float64
	for _, d := range delta[:n] {
		tmp := int32(avg - float64(d)/q)
		stdevSum += float64(int32(math.Pow(float64(tmp), 2)))
	}
	if p.histogram {
		fmt.Fprintf(w, "#, %s\n", "usec")
		for i, d := range delta[:n] {
			fmt.Fprintf(w, "%d, %s\n", i+1, cG(float64(d)/q))
		}
		p.printLatHeader(w)
	}
	i99 := int(math.Ceil(float64(n) * 0.99))
	i999 := int(math.Ceil(float64(n) * 0.999))
	fmt.Fprintf(w, " %-7d %d          %s        %s      %s  \t       %s     \t%s\t\t%s \t\t%s\n",
		p.size, p.iters,
		cFloat(float64(delta[0])/q, 7, 2), cFloat(float64(delta[n])/q, 7, 2),
		cFloat(float64(median)/q, 7, 2), cFloat(avg, 7, 2), cFloat(math.Sqrt(stdevSum/float64(n)), 7, 2),
		cFloat(float64(delta[i99])/q, 7, 2), cFloat(float64(delta[i999])/q, 7, 2))
}

// printLatDurReport is print_report_lat_duration: the average over the
// sample and the transactions per second.
func (c *ctx) printLatDurReport(w io.Writer, iters int) {
	p := c.p
	rtt := 2.0
	if p.t.verb == Read || p.t.verb == Atomic {
		rtt = 1
	}
	sample := float64(uint64(c.tcompleted[0] - c.tposted[0]))
	lat := sample / 1000 / rtt / float64(iters)
	tps := float64(iters) / (sample / 1e9)
	fmt.Fprintf(w, " %-7d       %d            %s        %s\n", p.size, iters, cFloat(lat, 7, 2), cFloat(tps, 7, 2))
}
