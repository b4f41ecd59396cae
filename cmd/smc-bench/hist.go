package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// hist is a lock-free latency histogram with about 6 % resolution (values
// below 32 ns get a bucket each, larger ones 16 buckets per power of two),
// and the exact maximum, as redis-benchmark reports it.
type hist struct {
	b   [1024]atomic.Uint64
	n   atomic.Uint64
	max atomic.Int64
}

func bucketOf(ns uint64) int {
	if ns < 32 {
		return int(ns)
	}
	e := bits.Len64(ns)
	return min((e-5)*16+int(ns>>(e-5)), 1023)
}

// bucketLow is the smallest value of bucket i.
func bucketLow(i int) uint64 {
	if i < 32 {
		return uint64(i)
	}
	e := i/16 + 4
	m := uint64(i%16 + 16)
	return m << (e - 5)
}

// add records one latency, n times (the requests of a pipeline share it).
func (h *hist) add(d time.Duration, n int) {
	d = max(d, 0)
	h.b[bucketOf(uint64(d))].Add(uint64(n))
	h.n.Add(uint64(n))
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantile returns the q-quantile (0..1) in microseconds, 0 when empty.
func (h *hist) quantile(q float64) float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n-1)) + 1
	var seen uint64
	for i := range h.b {
		seen += h.b[i].Load()
		if seen >= rank {
			return float64(bucketLow(i)) / 1e3
		}
	}
	return float64(bucketLow(len(h.b)-1)) / 1e3
}

// maxUs is the largest latency recorded, in microseconds.
func (h *hist) maxUs() float64 { return float64(h.max.Load()) / 1e3 }
