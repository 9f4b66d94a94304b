package metrics

import (
	"math"
	"slices"
	"sync/atomic"
)

// Hist is a live histogram with fixed upper bounds, safe for concurrent
// use without locks. The zero value is not usable: call NewHist.
type Hist struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket (not cumulative); the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

// NewHist returns a histogram with the given upper bounds, which must be
// finite and strictly increasing (the +Inf bucket is implied); it panics
// otherwise, as a fixed table of the caller is wrong.
func NewHist(bounds ...float64) *Hist {
	for i, b := range bounds {
		if math.IsInf(b, 0) || math.IsNaN(b) || (i > 0 && b <= bounds[i-1]) {
			panic("metrics: histogram bounds must be finite and strictly increasing")
		}
	}
	return &Hist{bounds: slices.Clone(bounds), counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records v in the first bucket whose bound is >= v. NaN is
// ignored.
func (h *Hist) Observe(v float64) {
	if math.IsNaN(v) {
		return
	}
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// HistogramSnapshot is a histogram's state at one moment: Counts has one
// entry per bound plus the +Inf bucket, each for its own bucket only.
type HistogramSnapshot struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
}

// Count is the number of observations.
func (s HistogramSnapshot) Count() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Snapshot reads the histogram. An observation racing with it may be in
// a bucket but not yet in the sum.
func (h *Hist) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{Bounds: h.bounds, Counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Sum = math.Float64frombits(h.sum.Load())
	return s
}
