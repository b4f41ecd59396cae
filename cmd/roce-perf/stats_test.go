package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Latency figures are one-way (half the round trip), with a nearest-rank
// percentile and the median of an even count averaged.
func TestLatStats(t *testing.T) {
	rtts := make([]time.Duration, 1000)
	for i := range rtts {
		rtts[i] = time.Duration(2*(1000-i)) * time.Microsecond // 2000..2 µs, reversed
	}
	s := newLatStats(rtts)
	assert.Equal(t, 1000, s.Iters)
	assert.Equal(t, 1.0, s.TMin)
	assert.Equal(t, 1000.0, s.TMax)
	assert.Equal(t, 500.5, s.TTypical)
	assert.Equal(t, 500.5, s.TAvg)
	assert.Equal(t, 990.0, s.P99)
	assert.Equal(t, 999.0, s.P999)
	assert.InDelta(t, 288.67, s.TStdev, 0.01)
	assert.Equal(t, &latStats{}, newLatStats(nil))
}

// The peak is the best rate over a window of a twentieth of the run, so one
// quick completion does not make it.
func TestPeak(t *testing.T) {
	start := time.Now()
	r := newRateRecorder(start)
	// 100 units per ms for 1 s, except a burst of 300 in ms 500..600.
	n := int64(0)
	for ms := 1; ms <= 1000; ms++ {
		n += 100
		if ms > 500 && ms <= 600 {
			n += 200
		}
		r.add(start.Add(time.Duration(ms)*time.Millisecond), n)
	}
	assert.InDelta(t, 300_000.0, r.peak(), 1, "the burst's rate, per second")
	s := newBWStats(n, 1<<20, time.Second, r.peak())
	assert.InDelta(t, 120_000.0, s.AvgMBs, 1e-6)
	assert.InDelta(t, 300_000.0, s.PeakMBs, 1)
	assert.InDelta(t, 120_000.0*(1<<20)*8/1e9, s.Gbits, 1e-6)
}

func TestCtlRoundTrip(t *testing.T) {
	b := make([]byte, ctlLen)
	putCtl(b, ctlFinAck, 1<<40+5)
	typ, v, ok := parseCtl(b)
	assert.True(t, ok)
	assert.Equal(t, byte(ctlFinAck), typ)
	assert.Equal(t, int64(1<<40+5), v)
	_, _, ok = parseCtl(make([]byte, 4096))
	assert.False(t, ok, "a data packet is not a control message")
	var got [][]byte
	segments(make([]byte, 10), 4, func(p []byte) { got = append(got, p) })
	assert.Len(t, got, 3)
	assert.Len(t, got[2], 2)
}

func TestRawShape(t *testing.T) {
	for _, tc := range []struct{ size, mtu, seg, perMsg int }{
		{65536, 4096, 4096, 16},
		{64, 4096, 64, 1},
		{6000, 4096, 3000, 2},
		{0, 4096, 1, 1},
		{4097, 1024, 820, 5},
	} {
		seg, perMsg := rawShape(tc.size, tc.mtu)
		assert.Equal(t, []int{tc.seg, tc.perMsg}, []int{seg, perMsg}, "%+v", tc)
	}
}
