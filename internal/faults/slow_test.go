package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
)

// TestSlowRedisDeadlinesHold puts a fault-injecting proxy between the environments and Redis.
//
//   - Latency below the client timeouts (200 ms per round trip, against a 500 ms read
//     timeout): every event is still executed exactly once and nothing fails.
//   - Replies slower than the read timeout, and a blackhole that answers nothing: every
//     delivery gets a 503 within the client's configured timeouts (one retry included), well
//     before the invocation deadline, and the work never runs. Once the fault ends, each event
//     is executed exactly once; claims whose reply was lost block retries (409) until their TTL.
//   - Connections dropped every few milliseconds while a stream of duplicates runs: go-redis
//     retries on a fresh connection and the core recognises its own claim, so nothing runs
//     twice unless a result could not be stored.
//
// Throughout, the work checks that an in-progress record is in Redis when it starts.
func TestSlowRedisDeadlinesHold(t *testing.T) {
	srv := testsupport.StartRedis(t)
	admin := srv.NewClient()
	proxy := testsupport.StartProxy(t, srv.Addr())
	const (
		environments = 4
		// The invocation timeout leaves the client's own timeouts to decide when to give up.
		invocation = 5 * time.Second
		// An explicit claim TTL (IDEM_LOCK_TTL) keeps the wait for orphaned claims short.
		lockTTL = 3 * time.Second
	)
	// The longest a command may take before the client reports failure, from the production
	// settings: two attempts (MaxRetries 1), each dialing, writing and reading, plus a backoff.
	clientBound := time.Duration(1+redisconn.DefaultMaxRetries)*
		(redisconn.DefaultDialTimeout+redisconn.DefaultWriteTimeout+redisconn.DefaultReadTimeout) + 100*time.Millisecond
	newSlowFleet := func(t *testing.T) (*fleet, *recorder) {
		rec := &recorder{checkClaim: claimChecker(admin, prefix)}
		f := newFleet(t, rec, invocation)
		for range environments {
			f.add(map[string]string{"REDIS_URL": "redis://" + proxy.Addr(), "IDEM_LOCK_TTL": lockTTL.String()})
		}
		return f, rec
	}

	t.Run("LatencyBelowTimeouts", func(t *testing.T) {
		f, rec := newSlowFleet(t)
		proxy.SetLatency(100*time.Millisecond, 100*time.Millisecond)
		defer proxy.SetLatency(0, 0)
		evs := stream(t, f, "evt_latency", 16, 4, 150*time.Millisecond, 300*time.Millisecond, nil)
		attempts, xs := rec.snapshot()
		checkOnceEach(t, xs, evs)
		counts := webhookfleet.Tally(attempts)
		if counts["unavailable"] > 0 || counts["failed"] > 0 {
			t.Errorf("latency below the timeouts caused failures: %s", webhookfleet.FormatCounts(counts))
		}
		t.Logf("100ms each way: %s; executed in p50 %s, replayed p50 %s, in progress p50 %s",
			webhookfleet.FormatCounts(counts),
			ms(webhookfleet.Percentile(durations(attempts, func(a attempt) bool { return a.Outcome() == "executed" }), 50)),
			ms(webhookfleet.Percentile(durations(attempts, func(a attempt) bool { return a.Outcome() == "replayed" }), 50)),
			ms(webhookfleet.Percentile(durations(attempts, func(a attempt) bool { return a.Outcome() == "in_progress" }), 50)))
	})

	// unreachable runs one delivery of each of n events while fault is in force, checks they
	// all fail closed in time, ends the fault and lets the provider retry until acknowledged.
	unreachable := func(t *testing.T, name string, fault, end func()) {
		f, rec := newSlowFleet(t)
		const n = 8
		evs := make([]event, n)
		for i := range evs {
			evs[i] = newEvent(fmt.Sprintf("evt_%s_%d", name, i))
		}
		// Warm environments: each holds open connections, so the fault hits commands on
		// established connections (a claim that reaches Redis but whose reply is lost), not
		// only new connections' handshakes.
		var wg sync.WaitGroup
		for i := range 2 * environments {
			wg.Go(func() { f.Send(context.Background(), i%environments, newEvent(fmt.Sprintf("evt_%s_warm_%d", name, i))) })
		}
		wg.Wait()
		warm, _ := rec.snapshot()
		rec.mu.Lock()
		rec.attempts, rec.executions = nil, nil
		rec.mu.Unlock()
		if c := webhookfleet.Tally(warm); c["executed"] != len(warm) {
			t.Fatalf("warm-up: %s", webhookfleet.FormatCounts(c))
		}
		fault()
		for i, ev := range evs {
			wg.Go(func() { f.Send(context.Background(), i%environments, ev) })
		}
		wg.Wait()
		during, xs := rec.snapshot()
		if len(xs) > 0 {
			t.Errorf("%d events executed while Redis could not answer", len(xs))
		}
		for _, a := range during {
			if a.Status != 503 {
				t.Errorf("attempt on %s during the fault: %d; want 503", a.Event, a.Status)
			}
			if a.Duration() > clientBound {
				t.Errorf("attempt on %s took %s to fail; want within the client timeouts (%s)", a.Event, a.Duration(), clientBound)
			}
		}
		d := durations(during, func(attempt) bool { return true })
		ended := time.Now()
		end()
		var acked atomic.Int32
		for i, ev := range evs {
			wg.Go(func() {
				if f.Deliver(context.Background(), i%environments, ev, 200*time.Millisecond, 4*lockTTL) {
					acked.Add(1)
				}
			})
		}
		wg.Wait()
		recovered := time.Since(ended)
		attempts, xs := rec.snapshot()
		checkOnceEach(t, xs, evs)
		if int(acked.Load()) != n {
			t.Errorf("%d of %d events acknowledged after the fault", acked.Load(), n)
		}
		t.Logf("%s: %d deliveries answered 503 in p50 %s, max %s (client bound %s, invocation timeout %s)",
			name, len(during), ms(webhookfleet.Percentile(d, 50)), ms(webhookfleet.Percentile(d, 100)), clientBound, invocation)
		t.Logf("%s: after the fault every event acknowledged within %s; attempts after it: %s",
			name, recovered.Round(time.Millisecond), webhookfleet.FormatCounts(webhookfleet.Tally(attempts[len(during):])))
	}

	t.Run("RepliesSlowerThanReadTimeout", func(t *testing.T) {
		unreachable(t, "slow_replies",
			func() { proxy.SetLatency(0, 2*redisconn.DefaultReadTimeout) },
			func() { proxy.SetLatency(0, 0) })
	})
	t.Run("Blackhole", func(t *testing.T) {
		unreachable(t, "blackhole", proxy.Blackhole, proxy.Resume)
	})

	t.Run("DroppedConnections", func(t *testing.T) {
		f, rec := newSlowFleet(t)
		droppedConnections(t, f, rec, proxy)
	})
}

// droppedConnections drops every connection through proxy every 15 ms while a stream of
// duplicates runs through the fleet: go-redis retries on a fresh connection and the core
// recognises its own claim and its own stored result, so nothing runs twice unless a result
// could not be stored.
func droppedConnections(t *testing.T, f *fleet, rec *recorder, proxy *testsupport.Proxy) {
	t.Helper()
	stop := make(chan struct{})
	var drops atomic.Int32
	go everyUntil(stop, 15*time.Millisecond, func() {
		proxy.Drop()
		drops.Add(1)
	})
	evs := stream(t, f, "evt_drops", 60, 4, 20*time.Millisecond, 100*time.Millisecond, stop)
	attempts, xs := rec.snapshot()
	checkGuarded(t, xs)
	notStored := f.NotStored()
	perEvent := byEvent(xs)
	var twice int
	for _, ev := range evs {
		n := len(perEvent[ev.ID])
		if n > 1 {
			twice++
		}
		if n < 1 || n > 1+notStored[ev.ID] {
			t.Errorf("event %s executed %d times with %d results not stored", ev.ID, n, notStored[ev.ID])
		}
	}
	for _, a := range attempts {
		if a.Status != 200 && a.Status != 409 && a.Status != 503 {
			t.Errorf("attempt on %s answered %d; want 200, 409 or 503", a.Event, a.Status)
		}
	}
	t.Logf("%d connection drops during %d events x 4 copies: %s; events executed twice: %d; results not stored: %d",
		drops.Load(), len(evs), webhookfleet.FormatCounts(webhookfleet.Tally(attempts)), twice, len(notStored))
}

// checkGuarded fails the test for every execution that started without its in-progress claim in
// Redis.
// checkOnceEach fails the test unless every execution held its claim and each of evs was
// executed exactly once.
func checkOnceEach(t *testing.T, xs []execution, evs []event) {
	t.Helper()
	checkGuarded(t, xs)
	perEvent := byEvent(xs)
	for _, ev := range evs {
		if n := len(perEvent[ev.ID]); n != 1 {
			t.Errorf("event %s executed %d times; want 1", ev.ID, n)
		}
	}
}

func checkGuarded(t *testing.T, xs []execution) {
	t.Helper()
	for _, x := range xs {
		if x.claim != claimHeld && x.claim != claimExpiredAfterStart {
			t.Errorf("event %s executed by attempt %d with its record %s; want an in-progress claim", x.event, x.attempt, x.claim)
		}
	}
}

// stream sends n events, one every spacing, each as copies deliveries at once to different
// environments, every delivery retried until acknowledged; it fails the test for an event never
// acknowledged. When the last delivery is answered it closes done, if given.
func stream(t *testing.T, f *fleet, name string, n, copies int, spacing, retryEvery time.Duration, done chan struct{}) []event {
	t.Helper()
	evs := make([]event, n)
	var wg sync.WaitGroup
	var unacked sync.Map
	for i := range evs {
		ev := newEvent(fmt.Sprintf("%s_%d", name, i))
		evs[i] = ev
		for c := range copies {
			wg.Go(func() {
				if !f.Deliver(context.Background(), (i+c)%f.Len(), ev, retryEvery, 30*time.Second) {
					unacked.Store(ev.ID, true)
				}
			})
		}
		time.Sleep(spacing)
	}
	wg.Wait()
	if done != nil {
		close(done)
	}
	unacked.Range(func(k, _ any) bool {
		t.Errorf("event %s never acknowledged", k)
		return true
	})
	return evs
}
