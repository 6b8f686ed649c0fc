package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
)

// TestRedisRestartDuringDuplicateStream stops and restarts the Redis server while a stream of
// events arrives, each delivered several times at once to different environments and retried
// by the provider until acknowledged.
//
// Durable: the server runs with an append-only file fsynced on every write, the model of a
// store whose data survives the outage. Every event is executed exactly once, except one whose
// result could not be stored because the outage fell between its claim and its completion
// (the function logs result_not_stored; its claim then expires and a retry runs it again).
//
// NoPersistence: the server comes back empty, as a cache node without persistence or replica
// does. Every record written before the restart is gone, so a retry after it executes its
// event again. The test asserts what still holds: exactly once before the restart, exactly
// once after it, and no event more than twice in all.
func TestRedisRestartDuringDuplicateStream(t *testing.T) {
	t.Run("Durable", func(t *testing.T) {
		testRestart(t, true, "--appendonly", "yes", "--appendfsync", "always")
	})
	t.Run("NoPersistence", func(t *testing.T) { testRestart(t, false) })
}

func testRestart(t *testing.T, durable bool, args ...string) {
	const (
		environments = 4
		numEvents    = 120
		copies       = 4 // deliveries of each event, sent at once to different environments
		spacing      = 25 * time.Millisecond
		stopAfter    = time.Second
		downFor      = 1500 * time.Millisecond
		retryEvery   = 150 * time.Millisecond
		// An invocation timeout of 2s gives claims a TTL of 4s (timeout + the 2s lock margin).
		invocation = 2 * time.Second
	)
	srv := testsupport.StartRedis(t, args...)
	rec := &recorder{checkClaim: claimChecker(srv.NewClient(), prefix)}
	f := newFleet(t, rec, invocation)
	for range environments {
		f.add(map[string]string{"REDIS_URL": srv.URL()})
	}

	ctx := context.Background()
	evs := make([]event, numEvents)
	for i := range evs {
		evs[i] = newEvent(fmt.Sprintf("evt_restart_%d", i))
	}
	var stoppedAt, restartBegin, restartedAt time.Time
	outage := make(chan error, 1)
	go func() {
		time.Sleep(stopAfter)
		err := srv.Stop()
		stoppedAt = time.Now()
		time.Sleep(downFor)
		restartBegin = time.Now()
		if err == nil {
			err = srv.Start()
		}
		restartedAt = time.Now()
		outage <- err
	}()

	var wg sync.WaitGroup
	var unacked sync.Map
	firstSent := make([]time.Time, numEvents)
	for i, ev := range evs {
		firstSent[i] = time.Now()
		for c := range copies {
			wg.Go(func() {
				if !f.Deliver(ctx, (i+c)%environments, ev, retryEvery, 30*time.Second) {
					unacked.Store(ev.ID, true)
				}
			})
		}
		time.Sleep(spacing)
	}
	if err := <-outage; err != nil {
		t.Fatalf("restart: %v", err)
	}
	wg.Wait()
	unacked.Range(func(k, _ any) bool {
		t.Errorf("event %s was never acknowledged: no full recovery", k)
		return true
	})

	// The provider sends every event once more after the stream: a late retry.
	streamAttempts, _ := rec.snapshot()
	late := map[string]int{}
	for i, ev := range evs {
		late[f.Send(ctx, i%environments, ev).Outcome()]++
	}
	attempts, executions := rec.snapshot()

	// While the server was down, every delivery was answered 503 and nothing ran.
	executedBy := map[int64]bool{}
	for _, x := range executions {
		executedBy[x.attempt] = true
	}
	var during []attempt
	for _, a := range attempts {
		if !a.Start.Before(stoppedAt) && !a.End.After(restartBegin) {
			during = append(during, a)
			if a.Status != 503 || executedBy[a.ID] {
				t.Errorf("attempt %d on %s while Redis was down: status %d, executed %v; want 503 and no work",
					a.ID, a.Event, a.Status, executedBy[a.ID])
			}
		}
	}
	if len(during) == 0 {
		t.Fatal("no delivery fell inside the outage: the test did not exercise it")
	}
	// The work never ran without a claim.
	checks := map[claimState]int{}
	for _, x := range executions {
		checks[x.claim]++
		if x.claim == claimMissing || x.claim == claimCompleted {
			t.Errorf("event %s executed by attempt %d with its record %s: work ran unguarded", x.event, x.attempt, x.claim)
		}
	}
	for _, a := range attempts {
		if a.Status != 200 && a.Status != 409 && a.Status != 503 {
			t.Errorf("attempt %d on %s answered %d; want 200, 409 or 503", a.ID, a.Event, a.Status)
		}
	}

	// Exactly once, except what the design admits: a result not stored (claim then expires)
	// and, without persistence, the records the restart erased.
	notStored := f.NotStored()
	perEvent := byEvent(executions)
	var twice, explained, lost, afterOnly int
	for i, ev := range evs {
		xs := perEvent[ev.ID]
		var pre, post int
		for _, x := range xs {
			if x.at.Before(restartBegin) {
				pre++
			} else {
				post++
			}
		}
		if len(xs) == 0 {
			t.Errorf("event %s was never executed", ev.ID)
			continue
		}
		if len(xs) > 1 {
			twice++
		}
		allowed := 1 + notStored[ev.ID]
		switch {
		case durable && len(xs) > allowed:
			t.Errorf("event %s executed %d times (%d results not stored): duplicate on a durable store", ev.ID, len(xs), notStored[ev.ID])
		case !durable && (pre > allowed || post > allowed):
			t.Errorf("event %s executed %d times before and %d after the restart (%d results not stored)", ev.ID, pre, post, notStored[ev.ID])
		case !durable && len(xs) > 2:
			t.Errorf("event %s executed %d times", ev.ID, len(xs))
		}
		if len(xs) > 1 && notStored[ev.ID] > 0 {
			explained++
		}
		if pre > 0 && post > 0 {
			lost++
		}
		if firstSent[i].After(restartedAt) {
			afterOnly++
			if len(xs) != 1 {
				t.Errorf("event %s, first sent after the restart, executed %d times", ev.ID, len(xs))
			}
		}
	}
	if durable && late["replayed"] != numEvents {
		t.Errorf("late retries after the stream: %s; want all %d replayed", webhookfleet.FormatCounts(late), numEvents)
	}

	// Measurements.
	var first503, last503, firstOKAfter time.Time
	for _, a := range streamAttempts {
		if a.Status == 503 {
			if first503.IsZero() || a.End.Before(first503) {
				first503 = a.End
			}
			if a.End.After(last503) {
				last503 = a.End
			}
		}
		if a.Status == 200 && a.Start.After(restartBegin) && (firstOKAfter.IsZero() || a.End.Before(firstOKAfter)) {
			firstOKAfter = a.End
		}
	}
	d503 := durations(streamAttempts, func(a attempt) bool { return a.Status == 503 })
	t.Logf("durable=%v: %d events x %d copies over %d environments; Redis down %s (stopped %s after the stream began)",
		durable, numEvents, copies, environments, restartBegin.Sub(stoppedAt).Round(time.Millisecond), stopAfter)
	t.Logf("stream attempts: %s; %d attempts fell entirely inside the outage, all 503", webhookfleet.FormatCounts(webhookfleet.Tally(streamAttempts)), len(during))
	t.Logf("503 answered in p50 %s, max %s; first 503 %s after the stop returned, last 503 %s after the server answered again",
		ms(webhookfleet.Percentile(d503, 50)), ms(webhookfleet.Percentile(d503, 100)), first503.Sub(stoppedAt).Round(time.Millisecond), last503.Sub(restartedAt).Round(time.Millisecond))
	t.Logf("first 200 started after the restart: %s after the server answered again (go-redis stops dialing after PoolSize failed dials and probes once a second)",
		firstOKAfter.Sub(restartedAt).Round(time.Millisecond))
	t.Logf("claim check at work time: %v", checks)
	t.Logf("executions %d for %d events; events executed twice: %d (%d with a result not stored, %d executed before and again after the restart); %d events first sent after the restart, each executed once",
		len(executions), numEvents, twice, explained, lost, afterOnly)
	t.Logf("late retry of every event after the stream: %s", webhookfleet.FormatCounts(late))
}
