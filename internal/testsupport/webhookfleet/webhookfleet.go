// Package webhookfleet runs execution environments of the Stripe webhook function in one process
// and delivers signed Stripe events to them as Stripe does: every delivery signed anew, and
// after any answer other than 200 sent again, to the next environment, until it is acknowledged
// or given up. The load run (cmd/load), the fault tests (internal/faults) and the comparison's
// measurement of the handler (bench/compare) drive the function through it.
package webhookfleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// Event is one Stripe event: every delivery of it carries the same body, signed anew.
type Event struct {
	ID      string
	Body    []byte
	Headers map[string]string // without the signature
}

// NewEvent returns the sample Stripe event with id (webhooktest.Sample).
func NewEvent(id string) (Event, error) {
	r, err := webhooktest.Sample("stripe", id, time.Now())
	if err != nil {
		return Event{}, fmt.Errorf("webhookfleet: event %s: %w", id, err)
	}
	return Event{ID: id, Body: r.Body, Headers: apigw.EventHeaders(r.Header)}, nil
}

// Request returns a delivery of e signed with secret at now, as API Gateway hands it to the
// function.
func (e Event) Request(secret string, now time.Time) (events.APIGatewayV2HTTPRequest, error) {
	signed, err := webhooktest.Sign("stripe", secret, webhook.Request{Header: apigw.HTTPHeader(e.Headers), Body: e.Body, Now: now})
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, fmt.Errorf("webhookfleet: sign %s: %w", e.ID, err)
	}
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "POST /webhooks/stripe",
		RawPath:  "/webhooks/stripe",
		Headers:  apigw.EventHeaders(signed.Header),
		Body:     string(e.Body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/webhooks/stripe"},
		},
	}, nil
}

// Env returns the environment variables of a Stripe webhook function checking signatures with
// secret, with vars (REDIS_URL, IDEM_*, LOG_LEVEL) on top.
func Env(secret string, vars map[string]string) map[string]string {
	env := map[string]string{"WEBHOOK_PROVIDER": "stripe", "WEBHOOK_SECRET": secret}
	maps.Copy(env, vars)
	return env
}

// Attempt is one delivery of an event to one environment and what it answered.
type Attempt struct {
	ID         int64  // unique within the fleet; AttemptID reads it from the context of the call
	Event      string // the event's id
	Env        int    // the environment's index
	Try        int    // 0 for a delivery, k for its k-th retry
	Start, End time.Time
	Status     int // the response's status; -1 when Handle returned an error
	Replayed   bool
	RetryAfter string // the retry-after header, if any
}

// Duration returns how long the attempt took.
func (a Attempt) Duration() time.Duration { return a.End.Sub(a.Start) }

// Outcome names what the function did with the attempt, from its response: executed,
// replayed, in_progress, unavailable, failed, or status_<code>.
func (a Attempt) Outcome() string {
	switch {
	case a.Status == 200 && a.Replayed:
		return "replayed"
	case a.Status == 200:
		return "executed"
	case a.Status == 409:
		return "in_progress"
	case a.Status == 503:
		return "unavailable"
	case a.Status == 500:
		return "failed"
	}
	return fmt.Sprintf("status_%d", a.Status)
}

// attemptKey is the context key carrying the id of the attempt a Handle call serves.
type attemptKey struct{}

// AttemptID returns the id of the attempt whose Handle call ctx belongs to (as a sink sees
// it), or 0.
func AttemptID(ctx context.Context) int64 {
	id, _ := ctx.Value(attemptKey{}).(int64)
	return id
}

// Fleet is a set of execution environments of the Stripe webhook function. Each has its own
// handler, built by handler.New from environment variables as at Lambda init, and so its own
// Redis client with the production options of redisconn. Set the fields before adding the
// first environment.
type Fleet struct {
	// Secret signs every delivery and is every environment's WEBHOOK_SECRET.
	Secret string
	// Timeout is the invocation timeout: each attempt's context deadline.
	Timeout time.Duration
	// MaxRetryEvery, when above Deliver's retryEvery, makes the provider back off: each retry
	// waits twice as long as the one before, up to this.
	MaxRetryEvery time.Duration
	// Observe, when set, is called with every attempt once it is answered, from the goroutine
	// that made it.
	Observe func(Attempt)

	envs   []*handler.Handler
	logs   []*testsupport.Buffer
	nextID atomic.Int64
}

// Add builds one more environment from Env(f.Secret, vars) with the handler options opts (a
// sink, a Redis client), and returns its index. The environment's log lines go to a buffer of
// its own, which NotStored reads, unless opts give another output.
func (f *Fleet) Add(ctx context.Context, vars map[string]string, opts ...handler.Option) (int, error) {
	env := Env(f.Secret, vars)
	i := len(f.envs)
	logs := &testsupport.Buffer{}
	h, err := handler.New(ctx, func(k string) string { return env[k] },
		append([]handler.Option{handler.WithLogOutput(logs)}, opts...)...)
	if err != nil {
		return 0, fmt.Errorf("environment %d: %w", i, err)
	}
	f.envs = append(f.envs, h)
	f.logs = append(f.logs, logs)
	return i, nil
}

// Len returns the number of environments.
func (f *Fleet) Len() int { return len(f.envs) }

// Close closes every environment's handler.
func (f *Fleet) Close() error {
	var errs []error
	for _, h := range f.envs {
		errs = append(errs, h.Close())
	}
	return errors.Join(errs...)
}

// Send delivers ev once to environment env, within Timeout, and returns what it answered.
func (f *Fleet) Send(ctx context.Context, env int, ev Event) Attempt {
	return f.send(ctx, env, ev, 0)
}

func (f *Fleet) send(ctx context.Context, env int, ev Event, try int) Attempt {
	a := Attempt{ID: f.nextID.Add(1), Event: ev.ID, Env: env, Try: try, Status: -1}
	req, err := ev.Request(f.Secret, time.Now())
	a.Start = time.Now()
	if err == nil {
		actx, cancel := context.WithTimeout(context.WithValue(ctx, attemptKey{}, a.ID), f.Timeout)
		var resp events.APIGatewayV2HTTPResponse
		resp, err = f.envs[env].Handle(actx, req)
		cancel()
		a.Status, a.Replayed, a.RetryAfter = resp.StatusCode, resp.Headers[idemhttp.HeaderReplayed] == "true", resp.Headers["retry-after"]
	}
	a.End = time.Now()
	if err != nil {
		a.Status = -1
	}
	if f.Observe != nil {
		f.Observe(a)
	}
	return a
}

// Deliver sends ev as a provider does: to environment env, and after any answer other than 200
// again after retryEvery (backing off up to MaxRetryEvery), to the next environment, until a
// 200, until giveUp has passed or until ctx ends. It reports whether ev was acknowledged.
func (f *Fleet) Deliver(ctx context.Context, env int, ev Event, retryEvery, giveUp time.Duration) bool {
	deadline := time.Now().Add(giveUp)
	for k := 0; ; k++ {
		if a := f.send(ctx, (env+k)%len(f.envs), ev, k); a.Status == 200 {
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
		if f.MaxRetryEvery > retryEvery {
			retryEvery = min(2*retryEvery, f.MaxRetryEvery)
		}
	}
}

// NotStored counts, per event id, the requests whose log line says the event was forwarded but
// its result not stored (result_not_stored, lock_lost): the only way the design lets a later
// delivery execute the event again while the store keeps its data.
func (f *Fleet) NotStored() map[string]int {
	n := map[string]int{}
	for _, l := range f.logs {
		sc := bufio.NewScanner(bytes.NewReader(l.Bytes()))
		sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
		for sc.Scan() {
			var line struct {
				Msg    string `json:"msg"`
				ID     string `json:"id"`
				Reason string `json:"reason"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "request" &&
				(line.Reason == "result_not_stored" || line.Reason == "lock_lost") {
				n[line.ID]++
			}
		}
	}
	return n
}

// Tally counts attempts by outcome.
func Tally(as []Attempt) map[string]int {
	m := map[string]int{}
	for _, a := range as {
		m[a.Outcome()]++
	}
	return m
}

// FormatCounts prints counts as "k1=v1 k2=v2" in key order.
func FormatCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// Percentile returns the p-th percentile (0-100) of ds, by the nearest-rank method; 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
