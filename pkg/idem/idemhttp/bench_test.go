package idemhttp_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/idemlambda/idem/pkg/idem"
)

// BenchmarkMiddleware compares a request through the middleware with a bare idem.Guard.Do of
// the same work, for a first request and for a replay, and reports the round trips per request:
// the middleware's cost over the core is parsing, buffering and copying, never a round trip.
func BenchmarkMiddleware(b *testing.B) {
	m, g, counter := countedMiddleware(b)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"order":"ord_1"}`))
	}))
	work := func(context.Context) (idem.Result, error) {
		return idem.Result{Status: 201, Headers: map[string]string{"content-type": "application/json"}, Body: []byte(`{"order":"ord_1"}`)}, nil
	}
	// seq numbers the calls across every run of a sub-benchmark in this process (-count runs
	// each again, on the same Redis): a first request's key is never one an earlier run stored.
	seq := 0
	run := func(b *testing.B, name string, call func(i int)) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			before := counter.RoundTrips.Load()
			for b.Loop() {
				call(seq)
				seq++
			}
			b.ReportMetric(float64(counter.RoundTrips.Load()-before)/float64(b.N), "round-trips/op")
		})
	}
	run(b, "first/middleware", func(i int) { serveHTTP(h, "m-first-"+strconv.Itoa(i), `{"sku":"tea"}`) })
	run(b, "first/guard", func(i int) {
		_, _ = g.Do(context.Background(), idem.Key{Scope: "api", ID: "g-first-" + strconv.Itoa(i)}, idem.FingerprintOf([]byte("x")), work)
	})
	serveHTTP(h, "m-replay", `{"sku":"tea"}`)
	run(b, "replay/middleware", func(int) { serveHTTP(h, "m-replay", `{"sku":"tea"}`) })
	_, _ = g.Do(context.Background(), idem.Key{Scope: "api", ID: "g-replay"}, idem.FingerprintOf([]byte("x")), work)
	run(b, "replay/guard", func(int) {
		_, _ = g.Do(context.Background(), idem.Key{Scope: "api", ID: "g-replay"}, idem.FingerprintOf([]byte("x")), work)
	})
}
