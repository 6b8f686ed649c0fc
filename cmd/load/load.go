package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
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

// Run sends cfg.Events events, each cfg.Copies times at once, to cfg.Environments environments
// of the Stripe webhook function, retries every delivery until it is acknowledged, and counts
// the executions from the sink's log lines.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	var mu sync.Mutex
	res := &Result{First: map[string]int{}, Retries: map[string]int{}, PerEvent: map[string]int{}}
	fleet := &webhookfleet.Fleet{Secret: secret, Timeout: cfg.Invocation, MaxRetryEvery: time.Second,
		Observe: func(a webhookfleet.Attempt) {
			mu.Lock()
			defer mu.Unlock()
			res.Attempts++
			res.Latencies = append(res.Latencies, a.Duration())
			if a.Try == 0 {
				res.First[a.Outcome()]++
			} else {
				res.Retries[a.Outcome()]++
			}
		}}
	defer fleet.Close()
	// Each environment's sink writes to its own buffer, written only by the sink, which
	// serialises its writes.
	sinkOut := make([]bytes.Buffer, cfg.Environments)
	for i := range sinkOut {
		vars := map[string]string{"REDIS_URL": cfg.RedisURL, "IDEM_KEY_PREFIX": cfg.Prefix}
		if _, err := fleet.Add(ctx, vars, handler.WithSink(sink.NewLog(&sinkOut[i]))); err != nil {
			return nil, err
		}
	}
	evs := make([]webhookfleet.Event, cfg.Events)
	for i := range evs {
		var err error
		if evs[i], err = webhookfleet.NewEvent(fmt.Sprintf("evt_load_%s_%d", cfg.Prefix, i)); err != nil {
			return nil, err
		}
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
						if !fleet.Deliver(ctx, (i+c)%cfg.Environments, evs[i], cfg.RetryEvery, cfg.GiveUp) {
							unacked.Add(1)
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

	for i := range sinkOut {
		n, err := countSinkLines(&sinkOut[i], res.PerEvent)
		if err != nil {
			return nil, fmt.Errorf("environment %d's sink log: %w", i, err)
		}
		res.Executions += n
	}
	for _, n := range fleet.NotStored() {
		res.ResultNotStored += n
	}
	return res, nil
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
