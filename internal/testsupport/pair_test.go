package testsupport

import (
	"testing"
)

// Each side of a pair runs every operation number once, in the benchmark's b.N, and the result
// carries both sides' times and their ratio.
func TestBenchPairRunsBothSidesOnEveryNumber(t *testing.T) {
	var path, floor []int
	var n int
	r := testing.Benchmark(func(b *testing.B) {
		path, floor, n = path[:0], floor[:0], b.N
		BenchPair(b, Pair{
			Path:  func(i int) { path = append(path, i) },
			Floor: func(i int) { floor = append(floor, i) },
		})
	})
	if len(path) != n || len(floor) != n {
		t.Fatalf("%d path and %d floor operations; want b.N = %d each", len(path), len(floor), n)
	}
	for i := range n {
		if path[i] != i || floor[i] != i {
			t.Fatalf("operation %d: path %d, floor %d", i, path[i], floor[i])
		}
	}
	for _, unit := range []string{"path-ns/op", "floor-ns/op", "path/floor"} {
		if v, ok := r.Extra[unit]; !ok || v <= 0 {
			t.Errorf("%s: %v, %v; want a positive measurement", unit, v, ok)
		}
	}
}
