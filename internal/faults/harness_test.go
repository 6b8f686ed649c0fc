package faults

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
)

// secret signs every delivery; the webhook handlers accept it through WEBHOOK_SECRET.
const secret = "whsec_faults_test"

// prefix is IDEM_KEY_PREFIX for the tests' private servers.
const prefix = "faults"

// event is one Stripe event: every delivery of it carries the same body, signed anew.
type event = webhookfleet.Event

func newEvent(id string) event {
	ev, err := webhookfleet.NewEvent(id)
	if err != nil {
		panic(err)
	}
	return ev
}

// recordKey is the Redis key the core stores an event's record under (docs/design.md):
// <prefix>:{<scope>:<hex sha256(id)>}.
func recordKey(prefix, scope, id string) string {
	sum := sha256.Sum256([]byte(id))
	return prefix + ":{" + scope + ":" + hex.EncodeToString(sum[:]) + "}"
}

// claimState is what Redis held for an event at the moment its work started.
type claimState int

const (
	claimNotChecked claimState = iota
	// claimHeld: an in-progress record, as the guard leaves it while the work runs.
	claimHeld
	// claimMissing: no record at all while the claim had to be held: the work ran without a
	// claim, or the claim was evicted.
	claimMissing
	// claimCompleted: a completed record: the event had been executed already.
	claimCompleted
	// claimUnknown: Redis did not answer the check (it was down).
	claimUnknown
	// claimExpiredAfterStart: no record, read when the claim may have expired since the work
	// started: the check reached Redis (by the server's clock) after the work's deadline plus the
	// guard's safety margin, the earliest the guard lets a claim expire. A slow check on a busy
	// host, not a broken promise; the work's start is judged by its context (claimLateStart).
	claimExpiredAfterStart
	// claimLateStart: the work started with its context ended: past its deadline, when its claim
	// may already have expired. The guard must never start work then.
	claimLateStart
	// claimErasedByRestart: no record, or another owner's completed one, read by a server that
	// restarted after the check was asked: a restart without persistence erases the claim (the
	// window the restart test measures), so such a read cannot judge the start.
	claimErasedByRestart
)

func (c claimState) String() string {
	return [...]string{"not checked", "held", "missing", "completed", "unknown", "expired after the work started", "started after its deadline", "erased by a restart after the work started"}[c]
}

// claimMargin is how long before a claim's expiry, at the earliest, the guard ends its work's
// context (pkg/idem's safety margin): a claim is held until the work's deadline plus this.
const claimMargin = 500 * time.Millisecond

// checkScript reads the server's clock and the record in one atomic step.
var checkScript = redis.NewScript(`local t = redis.call('TIME')
return {t[1], t[2], redis.call('GET', KEYS[1])}`)

// claimChecker returns a function that looks at the record of a Stripe event through admin,
// a client that bypasses every injected fault, from the context its work started with. A
// missing record counts as missing only when the server read it while the claim had to be held
// (before the work's deadline plus claimMargin, by the server's clock, the clock of the claim's
// TTL): a check delayed past that on a busy host cannot tell, and says so, rather than blaming
// or excusing the guard.
func claimChecker(admin redis.UniversalClient, prefix string) func(ctx context.Context, id string) claimState {
	return func(work context.Context, id string) claimState {
		s, _ := checkClaim(work, admin, prefix, id)
		return s
	}
}

// restartClaimChecker is claimChecker for a server that restarts: restarting returns when its
// last stop began and when it began to start again (zero before). A record missing, or
// completed by another owner, counts as erased by the restart, not as a breach, when the check
// was asked before the stop began and read by the restarted server (by the server's clock).
func restartClaimChecker(admin redis.UniversalClient, prefix string, restarting func() (stopped, started time.Time)) func(ctx context.Context, id string) claimState {
	return func(work context.Context, id string) claimState {
		asked := time.Now()
		s, read := checkClaim(work, admin, prefix, id)
		if s == claimMissing || s == claimCompleted {
			if stopped, started := restarting(); !stopped.IsZero() && asked.Before(stopped) && !started.IsZero() && read.After(started) {
				return claimErasedByRestart
			}
		}
		return s
	}
}

// checkClaim reads what Redis holds for the Stripe event id from the context its work started
// with, and when the server read it.
func checkClaim(work context.Context, admin redis.UniversalClient, prefix, id string) (claimState, time.Time) {
	if work.Err() != nil {
		return claimLateStart, time.Time{}
	}
	deadline, hasDeadline := work.Deadline()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := checkScript.Run(ctx, admin, []string{recordKey(prefix, "stripe", id)}).Slice()
	if err != nil || len(v) < 2 {
		return claimUnknown, time.Time{}
	}
	sec, _ := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	usec, _ := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
	read := time.Unix(sec, usec*1000)
	if len(v) < 3 {
		if hasDeadline && !read.Before(deadline.Add(claimMargin)) {
			return claimExpiredAfterStart, read
		}
		return claimMissing, read
	}
	rec, _ := v[2].(string)
	if len(rec) > 1 && rec[1] == 'P' {
		return claimHeld, read
	}
	return claimCompleted, read
}

// execution is one run of the webhook function's work: the sink accepting an event.
type execution struct {
	event   string
	attempt int64
	env     int
	at      time.Time // when the work started
	claim   claimState
}

// attempt is one delivery of an event to one environment and what it answered.
type attempt = webhookfleet.Attempt

// recorder collects what the environments of a test did.
type recorder struct {
	mu         sync.Mutex
	executions []execution
	attempts   []attempt

	// checkClaim, when set, is asked at the start of every execution what Redis holds.
	checkClaim func(ctx context.Context, id string) claimState
	// hook, when set, runs inside the work before it completes; an error fails the work.
	hook func(ctx context.Context, env int, id string) error
}

func (r *recorder) addAttempt(a attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, a)
}

// snapshot returns copies of everything recorded so far.
func (r *recorder) snapshot() ([]attempt, []execution) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts), slices.Clone(r.executions)
}

// envSink is one environment's sink: it records each event it accepts.
type envSink struct {
	r   *recorder
	env int
}

// Send records e as executed by the attempt in ctx, after the hook, if any, lets it.
func (s envSink) Send(ctx context.Context, e sink.Event) error {
	x := execution{event: e.ID, env: s.env, at: time.Now(), claim: claimNotChecked}
	x.attempt = webhookfleet.AttemptID(ctx)
	if s.r.checkClaim != nil {
		x.claim = s.r.checkClaim(ctx, e.ID)
	}
	if s.r.hook != nil {
		if err := s.r.hook(ctx, s.env, e.ID); err != nil {
			return err
		}
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.executions = append(s.r.executions, x)
	return nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer = testsupport.Buffer

// fleet is a set of execution environments of the Stripe webhook function (webhookfleet), whose
// sinks and attempts record to rec.
type fleet struct {
	*webhookfleet.Fleet
	t   testing.TB
	rec *recorder
}

// newFleet returns a fleet whose attempts time out after timeout, closed at cleanup.
func newFleet(t testing.TB, rec *recorder, timeout time.Duration) *fleet {
	f := &fleet{Fleet: &webhookfleet.Fleet{Secret: secret, Timeout: timeout, Observe: rec.addAttempt}, t: t, rec: rec}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// add builds one more environment from vars (REDIS_URL, REDIS_CLUSTER, IDEM_*), on top of
// the Stripe provider and secret, and returns its index.
func (f *fleet) add(vars map[string]string) int {
	f.t.Helper()
	env := map[string]string{"IDEM_KEY_PREFIX": prefix, "LOG_LEVEL": "warn"}
	maps.Copy(env, vars)
	i, err := f.Add(context.Background(), env, handler.WithSink(envSink{r: f.rec, env: f.Len()}))
	if err != nil {
		f.t.Fatal(err)
	}
	return i
}

// everyUntil calls f every period until stop is closed, and returns then.
func everyUntil(stop <-chan struct{}, every time.Duration, f func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			f()
		}
	}
}

// byEvent groups executions by event id.
func byEvent(xs []execution) map[string][]execution {
	m := map[string][]execution{}
	for _, x := range xs {
		m[x.event] = append(m[x.event], x)
	}
	return m
}

// executedAttempts returns the ids of the attempts that ran the work in executions.
func executedAttempts(executions []execution) map[int64]bool {
	executedBy := map[int64]bool{}
	for _, x := range executions {
		executedBy[x.attempt] = true
	}
	return executedBy
}

// claimCounts counts executions by what Redis held for their event when the work started.
func claimCounts(executions []execution) map[claimState]int {
	checks := map[claimState]int{}
	for _, x := range executions {
		checks[x.claim]++
	}
	return checks
}

// checkWorkRanUnderClaims fails t for each execution whose event had no record, or a completed
// one, when the work started: the work ran unguarded.
func checkWorkRanUnderClaims(t *testing.T, executions []execution) {
	t.Helper()
	for _, x := range executions {
		if x.claim == claimMissing || x.claim == claimCompleted || x.claim == claimLateStart {
			t.Errorf("event %s executed by attempt %d with its record %s: work ran unguarded", x.event, x.attempt, x.claim)
		}
	}
}

// checkAnswersAllowed fails t for each attempt answered other than the contract allows while
// Redis fails: 200, 409 or 503.
func checkAnswersAllowed(t *testing.T, attempts []attempt) {
	t.Helper()
	for _, a := range attempts {
		if a.Status != 200 && a.Status != 409 && a.Status != 503 {
			t.Errorf("attempt %d on %s answered %d; want 200, 409 or 503", a.ID, a.Event, a.Status)
		}
	}
}

// durations returns the durations of the attempts that satisfy keep.
func durations(as []attempt, keep func(attempt) bool) []time.Duration {
	var ds []time.Duration
	for _, a := range as {
		if keep(a) {
			ds = append(ds, a.Duration())
		}
	}
	return ds
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
