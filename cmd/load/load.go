package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/functions/webhook/handler"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/sink"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// Config is one load run.
type Config struct {
	// RedisURL is the REDIS_URL every environment connects to.
	RedisURL string
	// Prefix is IDEM_KEY_PREFIX: every key the run writes starts with it.
	Prefix string
	// Environments is the number of execution environments, each with its own handler and
	// Redis client.
	Environments int
	// Events is the number of distinct Stripe events.
	Events int
	// Copies is how many deliveries of each event are sent at the same time, each to a
	// different environment (round robin).
	Copies int
	// InFlight is how many events are being delivered at once.
	InFlight int
	// Invocation is each call's deadline, as the function timeout gives it.
	Invocation time.Duration
	// RetryEvery is how long a delivery answered other than 200 waits before it is sent again;
	// it doubles on every retry, up to 1s. Providers retry until they get a 2xx.
	RetryEvery time.Duration
	// GiveUp bounds how long one delivery is retried.
	GiveUp time.Duration
}

// secret signs the run's deliveries.
const secret = "whsec_load"

// Result is what a run measured.
type Result struct {
	Deliveries int           // deliveries sent, retries not counted
	Attempts   int           // calls to the handlers, retries included
	Wall       time.Duration // from the first delivery to the last answer
	// Executions counts the sink's log lines: one per forwarded event.
	Executions int
	// PerEvent is how many sink lines each event got.
	PerEvent map[string]int
	// First counts the first answer to each delivery by outcome; Retries the answers to its
	// retries.
	First, Retries map[string]int
	// Unacknowledged counts deliveries that never got a 200 within GiveUp.
	Unacknowledged int
	// Latencies of every call, retries included.
	Latencies []time.Duration
	// ResultNotStored counts requests logged with outcome error and reason result_not_stored or
	// lock_lost: forwarded, but their result not stored.
	ResultNotStored int
}

// Check reports why the run is not exactly once, or nil.
func (r *Result) Check(events int) error {
	var problems []string
	if r.Executions != events {
		problems = append(problems, fmt.Sprintf("%d executions for %d events", r.Executions, events))
	}
	var twice, never int
	for _, n := range r.PerEvent {
		if n > 1 {
			twice++
		}
	}
	never = events - len(r.PerEvent)
	if twice > 0 {
		problems = append(problems, fmt.Sprintf("%d events executed more than once", twice))
	}
	if never > 0 {
		problems = append(problems, fmt.Sprintf("%d events never executed", never))
	}
	if r.Unacknowledged > 0 {
		problems = append(problems, fmt.Sprintf("%d deliveries never acknowledged", r.Unacknowledged))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("not exactly once: %s", strings.Join(problems, "; "))
}

// environment is one execution environment: a handler built as at Lambda init, whose log sink
// writes to its own buffer.
type environment struct {
	h        *handler.Handler
	sinkOut  bytes.Buffer // written only by the sink, which serialises its writes
	requests lockedWriter
}

// lockedWriter is a buffer safe for concurrent writes.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// Run sends cfg.Events events, each cfg.Copies times at once, to cfg.Environments environments
// of the Stripe webhook function, retries every delivery until it is acknowledged, and counts
// the executions from the sink's log lines.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	stripe, ok := webhook.Lookup("stripe")
	if !ok {
		return nil, errors.New("load: no stripe preset")
	}
	env := map[string]string{
		"WEBHOOK_PROVIDER": "stripe",
		"WEBHOOK_SECRET":   secret,
		"REDIS_URL":        cfg.RedisURL,
		"IDEM_KEY_PREFIX":  cfg.Prefix,
	}
	envs := make([]*environment, cfg.Environments)
	for i := range envs {
		e := &environment{}
		var err error
		e.h, err = handler.New(ctx, func(k string) string { return env[k] },
			handler.WithSink(sink.NewLog(&e.sinkOut)), handler.WithLogOutput(&e.requests))
		if err != nil {
			return nil, fmt.Errorf("environment %d: %w", i, err)
		}
		defer e.h.Close()
		envs[i] = e
	}

	type delivery struct {
		body    []byte
		headers map[string]string
	}
	bodies := make([]delivery, cfg.Events)
	for i := range bodies {
		r, err := webhooktest.Sample("stripe", fmt.Sprintf("evt_load_%s_%d", cfg.Prefix, i), time.Now())
		if err != nil {
			return nil, err
		}
		bodies[i] = delivery{r.Body, r.Headers}
	}
	request := func(d delivery) events.APIGatewayV2HTTPRequest {
		// Each attempt is signed anew, as Stripe signs each retry; signing with a valid
		// preset and secret cannot fail.
		signed, _ := webhooktest.Sign(stripe, secret, webhook.Request{Headers: maps.Clone(d.headers), Body: d.body, Now: time.Now()})
		h := signed.Headers
		return events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "POST /webhooks/stripe", RawPath: "/webhooks/stripe", Headers: h, Body: string(d.body),
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/webhooks/stripe"},
			},
		}
	}

	var mu sync.Mutex
	res := &Result{First: map[string]int{}, Retries: map[string]int{}, PerEvent: map[string]int{}}
	call := func(e *environment, req events.APIGatewayV2HTTPRequest, first bool) int {
		cctx, cancel := context.WithTimeout(ctx, cfg.Invocation)
		t := time.Now()
		resp, _ := e.h.Handle(cctx, req)
		d := time.Since(t)
		cancel()
		o := outcome(resp)
		mu.Lock()
		defer mu.Unlock()
		res.Attempts++
		res.Latencies = append(res.Latencies, d)
		if first {
			res.First[o]++
		} else {
			res.Retries[o]++
		}
		return resp.StatusCode
	}

	var unacked atomic.Int32
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.InFlight {
		wg.Go(func() {
			for i := range next {
				var copies sync.WaitGroup
				for c := range cfg.Copies {
					copies.Go(func() {
						e := (i + c) % len(envs)
						deadline := time.Now().Add(cfg.GiveUp)
						wait := cfg.RetryEvery
						for k := 0; call(envs[(e+k)%len(envs)], request(bodies[i]), k == 0) != 200; k++ {
							if time.Now().Add(wait).After(deadline) {
								unacked.Add(1)
								return
							}
							time.Sleep(wait)
							wait = min(2*wait, time.Second)
						}
					})
				}
				copies.Wait()
			}
		})
	}
	for i := range cfg.Events {
		next <- i
	}
	close(next)
	wg.Wait()
	res.Wall = time.Since(start)
	res.Deliveries = cfg.Events * cfg.Copies
	res.Unacknowledged = int(unacked.Load())

	for i, e := range envs {
		n, err := countSinkLines(&e.sinkOut, res.PerEvent)
		if err != nil {
			return nil, fmt.Errorf("environment %d's sink log: %w", i, err)
		}
		res.Executions += n
		res.ResultNotStored += countNotStored(e.requests.buf.Bytes())
	}
	return res, nil
}

// outcome names a response: executed, replayed, in_progress, unavailable, failed, or the status.
func outcome(resp events.APIGatewayV2HTTPResponse) string {
	switch {
	case resp.StatusCode == 200 && resp.Headers[idemhttp.HeaderReplayed] == "true":
		return "replayed"
	case resp.StatusCode == 200:
		return "executed"
	case resp.StatusCode == 409:
		return "in_progress"
	case resp.StatusCode == 503:
		return "unavailable"
	case resp.StatusCode == 500:
		return "failed"
	}
	return fmt.Sprintf("status_%d", resp.StatusCode)
}

// countSinkLines counts the log sink's lines in r, one JSON object per forwarded event, adding
// each event id's count to perEvent. A line that is not such an object is an error.
func countSinkLines(r io.Reader, perEvent map[string]int) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	n := 0
	for sc.Scan() {
		var line struct {
			Provider string          `json:"provider"`
			ID       string          `json:"id"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.ID == "" || len(line.Body) == 0 {
			return n, fmt.Errorf("line %d is not an event line: %q", n+1, sc.Text())
		}
		perEvent[line.ID]++
		n++
	}
	return n, sc.Err()
}

// countNotStored counts request log lines whose result was not stored.
func countNotStored(logs []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		var line struct {
			Msg    string `json:"msg"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "request" &&
			(line.Reason == "result_not_stored" || line.Reason == "lock_lost") {
			n++
		}
	}
	return n
}

// percentile returns the p-th percentile (0-100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// formatCounts prints counts as "k1=v1 k2=v2" in key order.
func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
