package testsupport

import (
	"testing"
	"time"
)

// PairBlock is how many operations of one side a paired benchmark runs between two readings of
// the clock: short enough that both sides of a pair see the machine in the same state, long
// enough that reading the clock (about 100 ns here) is a small part of a block.
const PairBlock = 10

// Pair is a paired benchmark: an operation and its floor, measured by BenchPair on the same
// server, client and process, alternately.
type Pair struct {
	// Path is the measured operation, called with 0, 1, ... b.N-1.
	Path func(i int)
	// Floor is what Path is compared with, called with the same numbers.
	Floor func(i int)
}

// BenchPair runs p.Path and p.Floor b.N times each, in alternating blocks of PairBlock
// operations (floor first in one block pair, path first in the next, so that neither side
// always runs on a connection the other just warmed), and reports each side's time per
// operation (path-ns/op, floor-ns/op) and their ratio (path/floor). The benchmark's own ns/op
// is the sum of the two.
//
// Two benchmarks run one after the other, each for a second or more, see different phases of a
// shared machine: its other work, its vCPUs' sleep states, a server started afresh. A ratio of
// their medians moves by 20% or more between runs of unchanged code. The blocks of a pair last
// a few milliseconds at most, so such phases weigh on both sides alike and the ratio is the
// cost of the path's own work.
func BenchPair(b *testing.B, p Pair) {
	b.ReportAllocs()
	var pathTime, floorTime time.Duration
	timed := func(fn func(int), from, to int) time.Duration {
		start := time.Now()
		for i := from; i < to; i++ {
			fn(i)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	for from, block := 0, 0; from < b.N; from, block = from+PairBlock, block+1 {
		to := min(from+PairBlock, b.N)
		if block%2 == 0 {
			floorTime += timed(p.Floor, from, to)
			pathTime += timed(p.Path, from, to)
		} else {
			pathTime += timed(p.Path, from, to)
			floorTime += timed(p.Floor, from, to)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(pathTime.Nanoseconds())/float64(b.N), "path-ns/op")
	b.ReportMetric(float64(floorTime.Nanoseconds())/float64(b.N), "floor-ns/op")
	b.ReportMetric(float64(pathTime)/float64(floorTime), "path/floor")
}
