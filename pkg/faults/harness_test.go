package faults

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/functions/webhook/handler"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/sink"
	"github.com/idemlambda/idem/pkg/testsupport"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// secret signs every delivery; the webhook handlers accept it through WEBHOOK_SECRET.
const secret = "whsec_faults_test"

// prefix is IDEM_KEY_PREFIX for the tests' private servers.
const prefix = "faults"

// stripe is the preset deliveries are signed with (webhooktest), as Stripe would.
var stripe, _ = webhook.Lookup("stripe")

// event is one Stripe event: every delivery of it carries the same body, signed anew.
type event struct {
	id      string
	body    []byte
	headers map[string]string // without the signature
}

func newEvent(id string) event {
	r, err := webhooktest.Sample("stripe", id, time.Now())
	if err != nil {
		panic(err)
	}
	return event{id: id, body: r.Body, headers: r.Headers}
}

// request returns a delivery of e signed at now, as API Gateway hands it to the function.
func (e event) request(now time.Time) events.APIGatewayV2HTTPRequest {
	h := make(map[string]string, len(e.headers)+1)
	maps.Copy(h, e.headers)
	signed, err := webhooktest.Sign(stripe, secret, webhook.Request{Body: e.body, Now: now})
	if err != nil {
		panic(err)
	}
	maps.Copy(h, signed.Headers)
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "POST /webhooks/stripe",
		RawPath:  "/webhooks/stripe",
		Headers:  h,
		Body:     string(e.body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/webhooks/stripe"},
		},
	}
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
	// claimMissing: no record at all: the work ran without a claim, or the claim was evicted.
	claimMissing
	// claimCompleted: a completed record: the event had been executed already.
	claimCompleted
	// claimUnknown: Redis did not answer the check (it was down).
	claimUnknown
)

func (c claimState) String() string {
	return [...]string{"not checked", "held", "missing", "completed", "unknown"}[c]
}

// claimChecker returns a function that looks at the record of a Stripe event through admin,
// a client that bypasses every injected fault.
func claimChecker(admin redis.UniversalClient, prefix string) func(id string) claimState {
	return func(id string) claimState {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		v, err := admin.Get(ctx, recordKey(prefix, "stripe", id)).Bytes()
		switch {
		case err == redis.Nil:
			return claimMissing
		case err != nil:
			return claimUnknown
		case len(v) > 1 && v[1] == 'P':
			return claimHeld
		default:
			return claimCompleted
		}
	}
}

// attemptKey is the context key carrying the id of the delivery attempt a Handle call serves,
// so the sink can tell which attempt executed an event.
type attemptKey struct{}

// execution is one run of the webhook function's work: the sink accepting an event.
type execution struct {
	event   string
	attempt int64
	env     int
	at      time.Time // when the work started
	claim   claimState
}

// attempt is one delivery of an event to one environment and what it answered.
type attempt struct {
	id         int64
	event      string
	env        int
	start, end time.Time
	status     int
	replayed   bool
	retryAfter string // the retry-after header, if any
}

func (a attempt) duration() time.Duration { return a.end.Sub(a.start) }

// outcome names what the function did with the attempt, from its response.
func (a attempt) outcome() string {
	switch {
	case a.status == 200 && a.replayed:
		return "replayed"
	case a.status == 200:
		return "executed"
	case a.status == 409:
		return "in_progress"
	case a.status == 503:
		return "unavailable"
	case a.status == 500:
		return "failed"
	}
	return fmt.Sprintf("status_%d", a.status)
}

// recorder collects what the environments of a test did.
type recorder struct {
	mu         sync.Mutex
	executions []execution
	attempts   []attempt
	nextID     atomic.Int64

	// checkClaim, when set, is asked at the start of every execution what Redis holds.
	checkClaim func(id string) claimState
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
	x.attempt, _ = ctx.Value(attemptKey{}).(int64)
	if s.r.checkClaim != nil {
		x.claim = s.r.checkClaim(e.ID)
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

// fleet is a set of execution environments of the Stripe webhook function. Each has its own
// handler, built by handler.New from environment variables as at Lambda init, and so its own
// Redis client with the production options of redisconn.
type fleet struct {
	t       testing.TB
	rec     *recorder
	envs    []*handler.Handler
	logs    []*syncBuffer
	timeout time.Duration // the invocation timeout: each attempt's context deadline
	// maxRetryEvery, when above deliver's retryEvery, makes the provider back off: each retry
	// waits twice as long as the one before, up to this.
	maxRetryEvery time.Duration
}

func newFleet(t testing.TB, rec *recorder, timeout time.Duration) *fleet {
	return &fleet{t: t, rec: rec, timeout: timeout}
}

// add builds one more environment from vars (REDIS_URL, REDIS_CLUSTER, IDEM_*), on top of
// the Stripe provider and secret, and returns its index.
func (f *fleet) add(vars map[string]string) int {
	f.t.Helper()
	env := map[string]string{
		"WEBHOOK_PROVIDER": "stripe",
		"WEBHOOK_SECRET":   secret,
		"IDEM_KEY_PREFIX":  prefix,
		"LOG_LEVEL":        "warn",
	}
	maps.Copy(env, vars)
	i := len(f.envs)
	logs := &syncBuffer{}
	h, err := handler.New(context.Background(), func(k string) string { return env[k] },
		handler.WithSink(envSink{r: f.rec, env: i}), handler.WithLogOutput(logs))
	if err != nil {
		f.t.Fatalf("environment %d: %v", i, err)
	}
	f.t.Cleanup(func() { _ = h.Close() })
	f.envs = append(f.envs, h)
	f.logs = append(f.logs, logs)
	return i
}

// send delivers ev once to environment env, within the invocation timeout.
func (f *fleet) send(ctx context.Context, env int, ev event) attempt {
	id := f.rec.nextID.Add(1)
	a := attempt{id: id, event: ev.id, env: env, start: time.Now()}
	actx, cancel := context.WithTimeout(context.WithValue(ctx, attemptKey{}, id), f.timeout)
	resp, err := f.envs[env].Handle(actx, ev.request(time.Now()))
	cancel()
	a.end = time.Now()
	a.status = resp.StatusCode
	if err != nil {
		a.status = -1
	}
	a.replayed = resp.Headers[idemhttp.HeaderReplayed] == "true"
	a.retryAfter = resp.Headers["retry-after"]
	f.rec.addAttempt(a)
	return a
}

// deliver sends ev as a provider does: to environment env, and after any answer other than
// 200 again after retryEvery (backing off up to maxRetryEvery), to the next environment, until a
// 200 or until giveUp has passed. It reports whether the event was acknowledged.
func (f *fleet) deliver(ctx context.Context, env int, ev event, retryEvery, giveUp time.Duration) bool {
	deadline := time.Now().Add(giveUp)
	for k := 0; ; k++ {
		if a := f.send(ctx, (env+k)%len(f.envs), ev); a.status == 200 {
			return true
		}
		if time.Now().Add(retryEvery).After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(retryEvery):
		}
		if f.maxRetryEvery > retryEvery {
			retryEvery = min(2*retryEvery, f.maxRetryEvery)
		}
	}
}

// notStored counts, per event id, the requests whose log line says the event was forwarded but
// its result not stored (result_not_stored, lock_lost): the only way the design lets a later
// delivery execute the event again while the store keeps its data.
func (f *fleet) notStored() map[string]int {
	n := map[string]int{}
	for _, l := range f.logs {
		sc := bufio.NewScanner(strings.NewReader(l.String()))
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg    string `json:"msg"`
				ID     string `json:"id"`
				Reason string `json:"reason"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "request" {
				continue
			}
			if line.Reason == "result_not_stored" || line.Reason == "lock_lost" {
				n[line.ID]++
			}
		}
	}
	return n
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

// tally counts attempts by outcome.
func tally(as []attempt) map[string]int {
	m := map[string]int{}
	for _, a := range as {
		m[a.outcome()]++
	}
	return m
}

// formatCounts prints counts as "k1=v1 k2=v2" in key order.
func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// percentile returns the p-th percentile (0-100) of ds, by the nearest-rank method.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// durations returns the durations of the attempts that satisfy keep.
func durations(as []attempt, keep func(attempt) bool) []time.Duration {
	var ds []time.Duration
	for _, a := range as {
		if keep(a) {
			ds = append(ds, a.duration())
		}
	}
	return ds
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
