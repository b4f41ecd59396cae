package main

import (
	"math"
	"slices"
	"time"
)

// Units as perftest reports them: MB is 2^20 bytes (format_factor 0x100000),
// Gb is 10^9 bits.
const (
	mebibyte   = 1 << 20
	bitsPerGig = 1e9
)

// bwStats is one bandwidth measurement.
type bwStats struct {
	Msgs        int64   `json:"iterations"`
	Bytes       int64   `json:"bytes"` // payload bytes delivered
	Seconds     float64 `json:"seconds"`
	PeakMBs     float64 `json:"bw_peak_mb_s"`
	AvgMBs      float64 `json:"bw_avg_mb_s"`
	Gbits       float64 `json:"gbit_s"`
	PeakGbits   float64 `json:"gbit_s_peak"`
	MsgRateMpps float64 `json:"msg_rate_mpps"`
	// Raw UDP and UD only: datagrams (UD SENDs) sent, and lost (sent but
	// never received).
	Packets int64 `json:"packets,omitempty"`
	Lost    int64 `json:"lost,omitempty"`
}

// rateRecorder samples (time, units done) as a run progresses, for the
// peak rate.
type rateRecorder struct {
	start   time.Time
	samples []rateSample
}

type rateSample struct {
	t time.Duration // since start
	n int64
}

func newRateRecorder(start time.Time) *rateRecorder {
	return &rateRecorder{start: start, samples: make([]rateSample, 0, 4096)}
}

func (r *rateRecorder) add(now time.Time, n int64) {
	r.samples = append(r.samples, rateSample{now.Sub(r.start), n})
}

// peak returns the highest rate (units per second) over any stretch of at
// least a twentieth of the run (and at least 10 ms, when the run is long
// enough). perftest takes the best stretch of any length, which on a
// software device measures one lucky batch; a windowed peak is the burst
// rate the device sustains.
func (r *rateRecorder) peak() float64 {
	if len(r.samples) < 2 {
		return 0
	}
	total := r.samples[len(r.samples)-1].t
	window := max(total/20, min(10*time.Millisecond, total))
	if window <= 0 {
		return 0
	}
	best, i := 0.0, 0
	for j := range r.samples {
		for i+1 < j && r.samples[j].t-r.samples[i+1].t >= window {
			i++
		}
		dt := r.samples[j].t - r.samples[i].t
		if dt < window {
			continue
		}
		best = max(best, float64(r.samples[j].n-r.samples[i].n)/dt.Seconds())
	}
	return best
}

// newBWStats computes the figures of msgs messages of size bytes in d.
func newBWStats(msgs int64, size int, d time.Duration, peakMsgsPerSec float64) *bwStats {
	s := &bwStats{Msgs: msgs, Bytes: msgs * int64(size), Seconds: d.Seconds()}
	if d <= 0 {
		return s
	}
	bps := float64(s.Bytes) / d.Seconds()
	s.AvgMBs = bps / mebibyte
	s.Gbits = bps * 8 / bitsPerGig
	s.MsgRateMpps = float64(msgs) / d.Seconds() / 1e6
	s.PeakMBs = max(peakMsgsPerSec*float64(size)/mebibyte, s.AvgMBs)
	s.PeakGbits = s.PeakMBs * mebibyte * 8 / bitsPerGig
	return s
}

// latStats summarizes a latency run, one-way (half the round trip) in
// microseconds as perftest reports SEND latency.
type latStats struct {
	Iters    int     `json:"iterations"`
	TMin     float64 `json:"t_min_us"`
	TMax     float64 `json:"t_max_us"`
	TTypical float64 `json:"t_typical_us"` // the median
	TAvg     float64 `json:"t_avg_us"`
	TStdev   float64 `json:"t_stdev_us"`
	P99      float64 `json:"p99_us"`
	P999     float64 `json:"p99_9_us"`
	Lost     int     `json:"lost,omitempty"` // raw UDP pings that timed out
}

// newLatStats summarizes round-trip times.
func newLatStats(rtts []time.Duration) *latStats {
	s := &latStats{Iters: len(rtts)}
	if len(rtts) == 0 {
		return s
	}
	us := make([]float64, len(rtts))
	for i, d := range rtts {
		us[i] = float64(d) / float64(time.Microsecond) / 2
	}
	slices.Sort(us)
	n := len(us)
	var sum float64
	for _, v := range us {
		sum += v
	}
	s.TAvg = sum / float64(n)
	var sq float64
	for _, v := range us {
		sq += (v - s.TAvg) * (v - s.TAvg)
	}
	s.TStdev = math.Sqrt(sq / float64(n))
	s.TMin, s.TMax = us[0], us[n-1]
	if n%2 == 0 {
		s.TTypical = (us[n/2-1] + us[n/2]) / 2
	} else {
		s.TTypical = us[n/2]
	}
	s.P99 = us[percentileIndex(n, 0.99)]
	s.P999 = us[percentileIndex(n, 0.999)]
	return s
}

// percentileIndex is the nearest-rank index of the p-th quantile.
func percentileIndex(n int, p float64) int {
	i := int(math.Ceil(p*float64(n))) - 1
	return min(max(i, 0), n-1)
}
