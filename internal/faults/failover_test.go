package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
	"github.com/idemlambda/idem/pkg/idem"
)

// run is one execution of the webhook function's work, with when it started and ended.
type run struct {
	event      string
	env        int
	attempt    int64 // the delivery attempt that ran it (webhookfleet.AttemptID)
	start, end time.Time
}

// runSink records every event the work forwards, after holding it for work (so that two
// executions of one event can overlap).
type runSink struct {
	mu   *sync.Mutex
	runs *[]run
	env  int
	work time.Duration
}

func (s runSink) Send(ctx context.Context, e sink.Event) error {
	start := time.Now()
	select {
	case <-time.After(s.work):
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.runs = append(*s.runs, run{event: e.ID, env: s.env, attempt: webhookfleet.AttemptID(ctx), start: start, end: time.Now()})
	return nil
}

// failoverResult is what one failover run measured.
type failoverResult struct {
	events, doubles, concurrent int
	// lostClaims: doubles whose second run started while the first run's claim was still
	// within its TTL (the failover lost the claim); lostResults: doubles whose second run
	// started after it (the claim survived, the result did not).
	lostClaims, lostResults int
	// neverRan: events whose work never ran within the deliveries' 5s of retries (refused
	// throughout: the provider would retry them later).
	neverRan int
	// resultWaits: for each lost result, how long after the failover the second run started.
	resultWaits []time.Duration
	// unacked: results too few replicas acknowledged (NotStored matching
	// ErrReplicasNotAcknowledged: IDEM_MIN_REPLICAS waits for the completion too); disclosed:
	// lost results that the guard's observer (the functions' warn line) heard of before the
	// second run; endedInLag: works that ended within the replica's lag before the promotion,
	// whose completions the replica cannot have had by then.
	unacked, disclosed, endedInLag int
	// late: the lost results' events the observer had not heard of before their second run;
	// lost: every lost result's event.
	late, lost []string
	tally      map[string]int
	// gaps: for each double, how long after the first run the second started.
	gaps []time.Duration
}

// failover runs a stream of Stripe events through 4 webhook environments on a primary whose
// replica trails it by lag, promotes the replica mid-stream and switches the environments to it:
// all at once, or half of them stale later. Every event's work takes 100ms, and every event is
// delivered twice (a second delivery 50ms after the first, to another environment, as a
// provider's retry after a timed-out response), each delivery retried every 100ms on anything
// but 200 for up to 5s. vars are the environments' IDEM_* settings.
func failover(t *testing.T, vars map[string]string, lag, stale time.Duration) failoverResult {
	t.Helper()
	const (
		envs    = 4
		events  = 300
		every   = 10 * time.Millisecond // one new event every 10ms: 3s of stream
		lockTTL = 2 * time.Second
		work    = 100 * time.Millisecond
		dup     = 50 * time.Millisecond // the second delivery, while the first is running
	)
	r := testsupport.StartReplicated(t)
	r.Link.SetLatency(0, lag) // the replication stream trails; acknowledgements do not
	var (
		mu   sync.Mutex
		runs []run
		as   []webhookfleet.Attempt
		// reported: when the guard's observer first heard of each event (LockLost, NotStored:
		// its result may be lost); unacked: how many reports matched ErrReplicasNotAcknowledged.
		reported = map[string]time.Time{}
		unacked  int
		// observed: every observation per event, for the account of a late report.
		observed = map[string][]observation{}
	)
	observe := idem.WithObserver(func(o idem.Observation) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if _, ok := reported[o.Key.ID]; !ok {
			reported[o.Key.ID] = now
		}
		observed[o.Key.ID] = append(observed[o.Key.ID], observation{at: now, kind: o.Outcome.Kind, err: o.Err})
		if errors.Is(o.Err, idem.ErrReplicasNotAcknowledged) {
			unacked++
		}
	})
	f := &webhookfleet.Fleet{Secret: secret, Timeout: time.Second, Observe: func(a webhookfleet.Attempt) {
		mu.Lock()
		as = append(as, a)
		mu.Unlock()
	}}
	t.Cleanup(func() { _ = f.Close() })
	endpoints := make([]*testsupport.Endpoint, envs)
	for i := range envs {
		endpoints[i] = testsupport.StartEndpoint(t, r.Primary.Addr())
		env := map[string]string{"REDIS_URL": endpoints[i].URL(), "IDEM_KEY_PREFIX": prefix, "LOG_LEVEL": "error",
			"IDEM_LOCK_TTL": lockTTL.String()}
		for k, v := range vars {
			env[k] = v
		}
		if _, err := f.Add(context.Background(), env, handler.WithSink(runSink{mu: &mu, runs: &runs, env: i, work: work}),
			handler.WithGuardOptions(observe)); err != nil {
			t.Fatal(err)
		}
	}

	ctx := context.Background()
	var wg sync.WaitGroup
	var failedOver time.Time
	wg.Go(func() {
		time.Sleep(events * every / 2)
		failedOver = switchOver(t, r, endpoints, stale)
	})
	for i := range events {
		ev := newEvent(fmt.Sprintf("evt_failover_%03d", i))
		wg.Go(func() { f.Deliver(ctx, i%envs, ev, 100*time.Millisecond, 5*time.Second) })
		wg.Go(func() {
			time.Sleep(dup)
			f.Deliver(ctx, (i+1)%envs, ev, 100*time.Millisecond, 5*time.Second)
		})
		time.Sleep(every)
	}
	wg.Wait()

	res := failoverResult{events: events, tally: webhookfleet.Tally(as), unacked: unacked}
	for _, x := range runs {
		if d := failedOver.Sub(x.end); d >= 0 && d < lag {
			res.endedInLag++
		}
	}
	res.countDoubles(runs, lockTTL, failedOver, reported)
	if vars["IDEM_MIN_REPLICAS"] != "" { // without it nothing is reported: NotStored needs the WAIT
		res.explainLateReports(t, runs, as, observed, failedOver)
		t.Logf("what the observer first heard of each lost result: %v", lostResultCauses(res.lost, observed))
	}
	t.Logf("%d events, %s: %d ran twice (%d at the same time); %d after a lost claim, %d after a lost result (second run %v after the failover, %d of them reported before the second run); %d works ended within the replica's lag before the promotion, %d results reported unacknowledged by the replica; second run after the first: %v; %d never ran within 5s of retries; answers: %s",
		events, describe(vars, lag, stale), res.doubles, res.concurrent, res.lostClaims, res.lostResults, res.resultWaits, res.disclosed, res.endedInLag, res.unacked, res.gaps, res.neverRan, webhookfleet.FormatCounts(res.tally))
	return res
}

// switchOver promotes r's replica and switches the endpoints to it: all at once, or with
// stale, half of them stale later; a second after, the old primary rejoins as a replica of
// the new one, as a replacement replica would, so that replica acknowledgement can be had
// again. It returns when the promotion was done (zero if it failed).
func switchOver(t *testing.T, r *testsupport.Replicated, endpoints []*testsupport.Endpoint, stale time.Duration) time.Time {
	ctx := context.Background()
	if err := r.Promote(ctx); err != nil {
		t.Error(err)
		return time.Time{}
	}
	failedOver := time.Now()
	half := len(endpoints) / 2
	for i, e := range endpoints {
		if i < half || stale == 0 {
			e.Switch(r.Replica.Addr())
		}
	}
	if stale > 0 {
		time.Sleep(stale)
		for _, e := range endpoints[half:] {
			e.Switch(r.Replica.Addr())
		}
	}
	time.Sleep(time.Second)
	if err := r.Demote(ctx); err != nil {
		t.Error(err)
	}
	return failedOver
}

// countDoubles counts the events of the stream that never ran and those that ran twice: at
// the same time, after a lost claim or after a lost result (measured from failedOver), and of
// the lost results those the guard's observer heard of (reported, per event) before their
// second run. lockTTL is the claims' TTL.
func (res *failoverResult) countDoubles(runs []run, lockTTL time.Duration, failedOver time.Time, reported map[string]time.Time) {
	byEv := map[string][]run{}
	for _, x := range runs {
		byEv[x.event] = append(byEv[x.event], x)
	}
	res.neverRan = res.events - len(byEv)
	for _, rs := range byEv {
		if len(rs) < 2 {
			continue
		}
		slices.SortFunc(rs, func(a, b run) int { return a.start.Compare(b.start) })
		res.doubles++
		if rs[1].start.Before(rs[0].end) {
			res.concurrent++
		}
		// A claim the failover lost lets a retry run within the retry schedule (100ms steps);
		// one that survived keeps every retry out until it expires, lockTTL after it was taken,
		// which was before the first run started by the claim's round trip and its WAIT (at
		// most the replica timeout, 200ms): half the TTL tells the two apart.
		res.gaps = append(res.gaps, rs[1].start.Sub(rs[0].start).Round(time.Millisecond))
		if rs[1].start.Before(rs[0].start.Add(lockTTL / 2)) {
			res.lostClaims++
		} else {
			res.lostResults++
			res.resultWaits = append(res.resultWaits, rs[1].start.Sub(failedOver))
			res.lost = append(res.lost, rs[0].event)
			if at, ok := reported[rs[0].event]; ok && at.Before(rs[1].start) {
				res.disclosed++
			} else {
				res.late = append(res.late, rs[0].event)
			}
		}
	}
}

// observation is one report of the guard's observer, as the failover test records it.
type observation struct {
	at   time.Time
	kind idem.Kind
	err  error
}

// explainLateReports logs, for every event run twice after a lost result that the observer had
// not heard of before its second run, the attempts that ran it and every observation of it,
// timed from the failover: what a late or missing report came from.
func (res *failoverResult) explainLateReports(t *testing.T, runs []run, as []webhookfleet.Attempt, observed map[string][]observation, failedOver time.Time) {
	t.Helper()
	byID := map[int64]webhookfleet.Attempt{}
	for _, a := range as {
		byID[a.ID] = a
	}
	since := func(at time.Time) time.Duration { return at.Sub(failedOver).Round(time.Millisecond) }
	for _, ev := range res.late {
		var b strings.Builder
		fmt.Fprintf(&b, "%s, reported late or never (times from the failover):", ev)
		for _, x := range runs {
			if x.event != ev {
				continue
			}
			a := byID[x.attempt]
			fmt.Fprintf(&b, " run on env %d %v..%v by attempt %d (try %d, %v..%v, %s);", x.env, since(x.start), since(x.end),
				x.attempt, a.Try, since(a.Start), since(a.End), a.Outcome())
		}
		for _, o := range observed[ev] {
			fmt.Fprintf(&b, " observed %s at %v: %v;", o.kind, since(o.at), o.err)
		}
		t.Log(b.String())
	}
}

// lostResultCauses counts the first observation of each event of lost by what it said: too few
// replicas acknowledged the result, the store call's deadline passed (the store did not answer
// by the claim's expiry), the claim was lost, or another error.
func lostResultCauses(lost []string, observed map[string][]observation) map[string]int {
	causes := map[string]int{}
	for _, ev := range lost {
		obs := observed[ev]
		switch {
		case len(obs) == 0:
			causes["not reported"]++
		case errors.Is(obs[0].err, idem.ErrReplicasNotAcknowledged):
			causes["replicas did not acknowledge"]++
		case errors.Is(obs[0].err, context.DeadlineExceeded):
			causes["store call's deadline"]++
		default:
			causes[fmt.Sprintf("%s: %v", obs[0].kind, obs[0].err)]++
		}
	}
	return causes
}

func describe(vars map[string]string, lag, stale time.Duration) string {
	s := fmt.Sprintf("replica lag %s", lag)
	if n := vars["IDEM_MIN_REPLICAS"]; n != "" {
		s += fmt.Sprintf(", IDEM_MIN_REPLICAS=%s IDEM_REPLICA_TIMEOUT=%s", n, vars["IDEM_REPLICA_TIMEOUT"])
	} else {
		s += ", no replica acknowledgement"
	}
	if stale > 0 {
		s += fmt.Sprintf(", half the environments on the old primary for %s", stale)
	}
	return s
}

// A replica trailing by 50ms is promoted mid-stream. Without replica acknowledgement the
// failover loses the claims and results of its last 50ms, and their retries run again; the test
// reports how many. With IDEM_MIN_REPLICAS=1 no claim that the replica had not acknowledged let
// work run, so no event runs twice after a lost claim. The setting also waits for the
// completion, in its round trip: a completion still waiting when the endpoint moves is sent again
// by the client's retry, to the new primary, which holds the claim; one that too few replicas
// acknowledged is reported NotStored. What is left is a result that had not reached the replica
// (the claim survived, the result did not), whose retries wait for the claim's TTL and then run
// the event again: the test reports how many, and asserts that the guard's observer heard of
// each before its second run (the functions log it as a warning).
func TestFailoverOfALaggingReplica(t *testing.T) {
	const lag = 50 * time.Millisecond
	off := failover(t, nil, lag, 0)
	if off.doubles == 0 {
		t.Log("without replica acknowledgement no event ran twice this time: the failover fell between records")
	}
	on := failover(t, map[string]string{"IDEM_MIN_REPLICAS": "1", "IDEM_REPLICA_TIMEOUT": "200ms"}, lag, 0)
	if on.lostClaims != 0 || on.concurrent != 0 {
		t.Errorf("with IDEM_MIN_REPLICAS=1: %d events ran twice after a lost claim, %d at the same time; want 0",
			on.lostClaims, on.concurrent)
	}
	if on.disclosed != on.lostResults {
		t.Errorf("with IDEM_MIN_REPLICAS=1: %d of the %d events run twice after a lost result were reported before their second run; want all",
			on.disclosed, on.lostResults)
	}
}

// As above, but half of the environments keep using the old primary for 500ms after the
// promotion (a stale DNS answer, old connections): without acknowledgement the two primaries
// both accept claims and the same event runs on each, at the same time. With it, the old
// primary, which has lost its replica, refuses every claim (503).
func TestFailoverWithAStaleEndpoint(t *testing.T) {
	const lag, stale = 50 * time.Millisecond, 500 * time.Millisecond
	failover(t, nil, lag, stale)
	on := failover(t, map[string]string{"IDEM_MIN_REPLICAS": "1", "IDEM_REPLICA_TIMEOUT": "200ms"}, lag, stale)
	if on.lostClaims != 0 || on.concurrent != 0 {
		t.Errorf("with IDEM_MIN_REPLICAS=1 and a stale endpoint: %d events ran twice after a lost claim, %d at the same time; want 0",
			on.lostClaims, on.concurrent)
	}
}
