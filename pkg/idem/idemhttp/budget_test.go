package idemhttp_test

import (
	"net/http"
	"testing"
)

// The middleware adds no Redis command to the core's: 2 round trips for a first request, 1 for
// a replay, 1 for a duplicate in progress, 2 for a failure, counted as the client sends them.
func TestMiddlewareKeepsTheCoreRoundTripBudget(t *testing.T) {
	m, _, counter := countedMiddleware(t)
	started, release := make(chan struct{}), make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Idempotency-Key") {
		case "fails":
			w.WriteHeader(http.StatusBadGateway)
		case "slow":
			close(started)
			<-release
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	step := func(name, key string, want int64) {
		t.Helper()
		before := counter.RoundTrips.Load()
		serveHTTP(h, key, "{}")
		if got := counter.RoundTrips.Load() - before; got != want {
			t.Errorf("%s: %d round trips, want %d", name, got, want)
		}
	}
	step("warm-up (loads the scripts)", "warm", 2)
	step("first request", "k", 2)
	step("replay", "k", 1)
	step("failure", "fails", 2)

	done := make(chan struct{})
	go func() { serveHTTP(h, "slow", "{}"); close(done) }()
	<-started // the first request holds the claim
	before := counter.RoundTrips.Load()
	if a := serveHTTP(h, "slow", "{}"); a.Code != http.StatusConflict {
		t.Errorf("duplicate in progress answered %d, want 409", a.Code)
	}
	if got := counter.RoundTrips.Load() - before; got != 1 {
		t.Errorf("duplicate in progress: %d round trips, want 1", got)
	}
	close(release)
	<-done
}
