package faults

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
)

// errKilled is what the killed environment's work returns if it is ever let go: by then its
// process is gone and nothing it does may reach Redis or the sink.
var errKilled = errors.New("faults: the environment was killed")

// TestKilledEnvironmentClaimExpiresThenRetryExecutesOnce kills an execution environment while
// its work runs, as Lambda does when an invocation times out or the sandbox crashes: the claim
// it took is neither completed nor released. Duplicates arriving meanwhile are answered 409
// with a retry-after no longer than the claim's TTL; once the claim expires at its TTL (the
// invocation timeout plus the lock margin), the provider's next retry executes the event, once,
// and later deliveries replay that result.
//
// The kill is in-process: the environment reaches Redis through its own proxy, and killing it
// closes that proxy (its connections are reset and it can never dial again, as after SIGKILL)
// and abandons the goroutine running its work.
func TestKilledEnvironmentClaimExpiresThenRetryExecutesOnce(t *testing.T) {
	const (
		invocation = time.Second // the function timeout: claims live 1s + the 2s lock margin
		lockTTL    = invocation + 2*time.Second
		retryEvery = 100 * time.Millisecond
	)
	srv := testsupport.StartRedis(t)
	admin := srv.NewClient()
	path := testsupport.StartProxy(t, srv.Addr()) // the doomed environment's network path

	started := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	rec := &recorder{checkClaim: claimChecker(admin, prefix)}
	rec.hook = func(ctx context.Context, env int, id string) error {
		if env != 0 {
			return nil
		}
		close(started)
		<-release // the process is dead: it never gets further on its own
		return errKilled
	}
	f := newFleet(t, rec, invocation)
	f.add(map[string]string{"REDIS_URL": "redis://" + path.Addr()})
	for range 3 {
		f.add(map[string]string{"REDIS_URL": srv.URL()})
	}

	ctx := context.Background()
	ev := newEvent("evt_killed_mid_work")
	var doomed sync.WaitGroup
	claimStart := time.Now()
	doomed.Go(func() { f.Send(ctx, 0, ev) })
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first delivery never started its work")
	}
	path.Close() // SIGKILL: connections reset, no further dial succeeds
	killedAt := time.Now()
	t.Cleanup(func() { letGo(); doomed.Wait() })

	pttl, err := admin.PTTL(ctx, recordKey(prefix, "stripe", ev.ID)).Result()
	if err != nil || pttl <= 0 || pttl > lockTTL {
		t.Fatalf("claim left by the killed environment: PTTL %v, %v; want a TTL up to %s", pttl, err, lockTTL)
	}

	// The provider retries to the other environments until one acknowledges the event.
	answered, recoveredAt := retryUntilAcknowledged(f, ev, killedAt.Add(lockTTL+10*time.Second), retryEvery)
	if recoveredAt.IsZero() {
		t.Fatalf("no retry was acknowledged within %s of the kill: %s", lockTTL+10*time.Second, webhookfleet.FormatCounts(webhookfleet.Tally(answered)))
	}
	checkRetriesWhileClaimed(t, answered, claimStart, lockTTL)
	last := answered[len(answered)-1]
	if last.Outcome() != "executed" {
		t.Errorf("the retry after the claim expired: %s; want executed", last.Outcome())
	}
	// Recovery happens at the TTL, not at some later default; a generous bound for a busy machine.
	if late := recoveredAt.Sub(claimStart); late > lockTTL+2*time.Second {
		t.Errorf("retry acknowledged %s after the claim; want within the claim TTL %s plus the retry interval", late, lockTTL)
	}
	checkExecutedOnceByALiveEnvironment(t, f, ev)

	// Letting the dead environment's goroutine go changes nothing: its release cannot reach Redis.
	letGo()
	doomed.Wait()
	if a := f.Send(ctx, 2, ev); a.Outcome() != "replayed" {
		t.Errorf("after the killed environment's work returned: %s; want replayed", a.Outcome())
	}
	if _, xs := rec.snapshot(); len(xs) != 1 {
		t.Errorf("executions after the killed environment returned: %d; want 1", len(xs))
	}

	t.Logf("claim TTL %s (invocation timeout %s + lock margin); PTTL read after the kill %s", lockTTL, invocation, pttl)
	t.Logf("retries every %s: %s; first acknowledged %s after the claim, %s after the kill",
		retryEvery, webhookfleet.FormatCounts(webhookfleet.Tally(answered)), recoveredAt.Sub(claimStart).Round(time.Millisecond), recoveredAt.Sub(killedAt).Round(time.Millisecond))
	t.Logf("409 answers took p50 %s", ms(webhookfleet.Percentile(durations(answered, func(a attempt) bool { return a.Status == 409 }), 50)))
}

// retryUntilAcknowledged sends ev to environments 1 to 3 of f in turn, every retryEvery, until
// one answers 200 or deadline passes; it returns the attempts and when the 200 came (zero
// without one).
func retryUntilAcknowledged(f *fleet, ev event, deadline time.Time, retryEvery time.Duration) ([]attempt, time.Time) {
	var answered []attempt
	for k := 0; time.Now().Before(deadline); k++ {
		a := f.Send(context.Background(), 1+k%3, ev)
		answered = append(answered, a)
		if a.Status == 200 {
			return answered, a.End
		}
		time.Sleep(retryEvery)
	}
	return answered, time.Time{}
}

// checkExecutedOnceByALiveEnvironment checks that more duplicates of ev to the live
// environments 1 to 3 of f replay its result, and that it ran exactly once, in a live
// environment, under its own claim.
func checkExecutedOnceByALiveEnvironment(t *testing.T, f *fleet, ev event) {
	t.Helper()
	for env := 1; env < 4; env++ {
		if a := f.Send(context.Background(), env, ev); a.Outcome() != "replayed" {
			t.Errorf("duplicate to environment %d after recovery: %s; want replayed", env, a.Outcome())
		}
	}
	_, executions := f.rec.snapshot()
	if len(executions) != 1 || executions[0].env == 0 || executions[0].claim != claimHeld {
		t.Fatalf("executions %+v; want exactly one, by a live environment, under its own claim", executions)
	}
}

// checkRetriesWhileClaimed checks that every retry answered before the claim taken at
// claimStart expired (after lockTTL) was a 409, and that each 409 told the provider to come
// back in whole seconds, no later than the claim's expiry.
func checkRetriesWhileClaimed(t *testing.T, answered []attempt, claimStart time.Time, lockTTL time.Duration) {
	t.Helper()
	claimExpiry := claimStart.Add(lockTTL) // the claim was set after claimStart: it expires no sooner
	for _, a := range answered {
		if a.End.Before(claimExpiry) && a.Status != 409 {
			t.Errorf("retry %d ended %s after the claim, before its TTL, with %d; want 409", a.ID, a.End.Sub(claimStart), a.Status)
		}
		if a.Status != 409 {
			continue
		}
		secs, err := strconv.Atoi(a.RetryAfter)
		if err != nil || secs < 1 || time.Duration(secs)*time.Second > lockTTL+time.Second {
			t.Errorf("409 retry-after %q; want whole seconds, at most the claim TTL %s", a.RetryAfter, lockTTL)
		}
	}
}
