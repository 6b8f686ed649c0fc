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
	var outageMu sync.Mutex
	var stopBegan, startBegan time.Time
	rec := &recorder{checkClaim: restartClaimChecker(srv.NewClient(), prefix, func() (time.Time, time.Time) {
		outageMu.Lock()
		defer outageMu.Unlock()
		return stopBegan, startBegan
	})}
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
		outageMu.Lock()
		stopBegan = time.Now()
		outageMu.Unlock()
		err := srv.Stop()
		stoppedAt = time.Now()
		time.Sleep(downFor)
		restartBegin = time.Now()
		outageMu.Lock()
		startBegan = restartBegin
		outageMu.Unlock()
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
	during := checkNothingRanWhileDown(t, attempts, executions, stoppedAt, restartBegin)
	// The work never ran without a claim, and every answer is one the contract allows.
	checkWorkRanUnderClaims(t, executions)
	checkAnswersAllowed(t, attempts)
	// Exactly once, except what the design admits: a result not stored (claim then expires)
	// and, without persistence, the records the restart erased.
	counts := checkExecutionsAcrossRestart(t, durable, evs, firstSent, executions, f.NotStored(), restartBegin, restartedAt)
	if durable && late["replayed"] != numEvents {
		t.Errorf("late retries after the stream: %s; want all %d replayed", webhookfleet.FormatCounts(late), numEvents)
	}

	// Measurements.
	first503, last503, firstOKAfter := outageAnswerTimes(streamAttempts, restartBegin)
	d503 := durations(streamAttempts, func(a attempt) bool { return a.Status == 503 })
	t.Logf("durable=%v: %d events x %d copies over %d environments; Redis down %s (stopped %s after the stream began)",
		durable, numEvents, copies, environments, restartBegin.Sub(stoppedAt).Round(time.Millisecond), stopAfter)
	t.Logf("stream attempts: %s; %d attempts fell entirely inside the outage, all 503", webhookfleet.FormatCounts(webhookfleet.Tally(streamAttempts)), len(during))
	t.Logf("503 answered in p50 %s, max %s; first 503 %s after the stop returned, last 503 %s after the server answered again",
		ms(webhookfleet.Percentile(d503, 50)), ms(webhookfleet.Percentile(d503, 100)), first503.Sub(stoppedAt).Round(time.Millisecond), last503.Sub(restartedAt).Round(time.Millisecond))
	t.Logf("first 200 started after the restart: %s after the server answered again (go-redis stops dialing after PoolSize failed dials and probes once a second)",
		firstOKAfter.Sub(restartedAt).Round(time.Millisecond))
	t.Logf("claim check at work time: %v", claimCounts(executions))
	t.Logf("executions %d for %d events; events executed twice: %d (%d with a result not stored, %d executed before and again after the restart); %d events first sent after the restart, each executed once",
		len(executions), numEvents, counts.twice, counts.explained, counts.lost, counts.afterOnly)
	t.Logf("late retry of every event after the stream: %s", webhookfleet.FormatCounts(late))
}

// checkNothingRanWhileDown checks that every attempt that began and ended between stopped
// and restarted, while the server was down, was answered 503 and ran no work; it returns those
// attempts, and fails t now if there are none: the test did not exercise the outage.
func checkNothingRanWhileDown(t *testing.T, attempts []attempt, executions []execution, stopped, restarted time.Time) []attempt {
	t.Helper()
	executedBy := executedAttempts(executions)
	var during []attempt
	for _, a := range attempts {
		if a.Start.Before(stopped) || a.End.After(restarted) {
			continue
		}
		during = append(during, a)
		if a.Status != 503 || executedBy[a.ID] {
			t.Errorf("attempt %d on %s while Redis was down: status %d, executed %v; want 503 and no work",
				a.ID, a.Event, a.Status, executedBy[a.ID])
		}
	}
	if len(during) == 0 {
		t.Fatal("no delivery fell inside the outage: the test did not exercise it")
	}
	return during
}

// restartCounts are what testRestart counts of the events' executions.
type restartCounts struct {
	twice     int // events executed more than once
	explained int // of those, events with a result not stored
	lost      int // events executed both before and after the restart
	afterOnly int // events first sent after the restart
}

// checkExecutionsAcrossRestart checks that each of evs (first sent at firstSent) was executed,
// no more often than the restart beginning at restartBegin and the results not stored
// (notStored, per event) explain, and exactly once when first sent after the server answered
// again at restartedAt; it returns what it counted.
func checkExecutionsAcrossRestart(t *testing.T, durable bool, evs []event, firstSent []time.Time, executions []execution,
	notStored map[string]int, restartBegin, restartedAt time.Time) restartCounts {
	t.Helper()
	perEvent := byEvent(executions)
	var c restartCounts
	for i, ev := range evs {
		xs := perEvent[ev.ID]
		if len(xs) == 0 {
			t.Errorf("event %s was never executed", ev.ID)
			continue
		}
		pre := executedBefore(xs, restartBegin)
		post := len(xs) - pre
		checkExecutedOnceEachSide(t, durable, ev.ID, pre, post, notStored[ev.ID])
		if len(xs) > 1 {
			c.twice++
			if notStored[ev.ID] > 0 {
				c.explained++
			}
		}
		if pre > 0 && post > 0 {
			c.lost++
		}
		if firstSent[i].After(restartedAt) {
			c.afterOnly++
			if len(xs) != 1 {
				t.Errorf("event %s, first sent after the restart, executed %d times", ev.ID, len(xs))
			}
		}
	}
	return c
}

// executedBefore counts the executions of xs whose work started before at.
func executedBefore(xs []execution, at time.Time) int {
	n := 0
	for _, x := range xs {
		if x.at.Before(at) {
			n++
		}
	}
	return n
}

// checkExecutedOnceEachSide checks the pre executions of event id before the restart and the
// post ones after it, given the notStored results of the event: on a durable store at most
// once in all, plus one per result not stored; without persistence as often on each side of
// the restart, and never more than twice.
func checkExecutedOnceEachSide(t *testing.T, durable bool, id string, pre, post, notStored int) {
	t.Helper()
	n, allowed := pre+post, 1+notStored
	switch {
	case durable && n > allowed:
		t.Errorf("event %s executed %d times (%d results not stored): duplicate on a durable store", id, n, notStored)
	case !durable && (pre > allowed || post > allowed):
		t.Errorf("event %s executed %d times before and %d after the restart (%d results not stored)", id, pre, post, notStored)
	case !durable && n > 2:
		t.Errorf("event %s executed %d times", id, n)
	}
}

// outageAnswerTimes returns when the first and the last 503 answers of attempts came, and the
// first 200 of an attempt started after restartBegin.
func outageAnswerTimes(attempts []attempt, restartBegin time.Time) (first503, last503, firstOKAfter time.Time) {
	for _, a := range attempts {
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
	return first503, last503, firstOKAfter
}
