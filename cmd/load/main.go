// Command load is the exactly-once load run: 8 execution environments of the Stripe webhook
// function (each its own handler and Redis client, built as at Lambda init), 10,000 signed
// deliveries of 1,000 distinct events, each event delivered 10 times at once to different
// environments, every delivery retried until acknowledged, against a real Redis. The sink is
// the log sink, writing one JSON line per forwarded event to a per-environment buffer; the
// executions are counted from those lines and must be exactly one per event.
//
// Usage:
//
//	go run ./cmd/load [-redis redis://127.0.0.1:6379] [-envs 8] [-events 1000] [-copies 10] [-inflight 32]
//
// Redis is REDIS_URL, or redis://127.0.0.1:6379, under a fresh key prefix whose keys are
// deleted at the end (-keep leaves them). It prints throughput, p50/p99 latency per call and
// the outcome counts, and exits 1 unless every event was executed exactly once and every
// delivery acknowledged.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
)

func main() {
	cfg := Config{Invocation: 3 * time.Second, RetryEvery: 50 * time.Millisecond, GiveUp: time.Minute}
	def := os.Getenv("REDIS_URL")
	if def == "" {
		def = "redis://127.0.0.1:6379"
	}
	flag.StringVar(&cfg.RedisURL, "redis", def, "Redis URL (default REDIS_URL, else redis://127.0.0.1:6379)")
	flag.IntVar(&cfg.Environments, "envs", 8, "execution environments")
	flag.IntVar(&cfg.Events, "events", 1000, "distinct events")
	flag.IntVar(&cfg.Copies, "copies", 10, "deliveries of each event, sent at once")
	flag.IntVar(&cfg.InFlight, "inflight", 32, "events delivered at the same time")
	keep := flag.Bool("keep", false, "leave the run's keys in Redis")
	flag.Parse()
	cfg.Prefix = "load-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	ctx := context.Background()
	res, err := Run(ctx, cfg)
	if !*keep {
		if cerr := cleanup(ctx, cfg.RedisURL, cfg.Prefix); cerr != nil {
			fmt.Fprintln(os.Stderr, "load: cleanup:", cerr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	report(cfg, res)
	if err := res.Check(cfg.Events); err != nil {
		fmt.Fprintln(os.Stderr, "load: FAIL:", err)
		os.Exit(1)
	}
	fmt.Printf("OK: %d events executed exactly once (%d sink lines) from %d deliveries\n", cfg.Events, res.Executions, res.Deliveries)
}

// report prints what the run measured.
func report(cfg Config, r *Result) {
	fmt.Printf("load: %d environments, %d events x %d copies = %d deliveries, %d events in flight, Redis %s, prefix %s\n",
		cfg.Environments, cfg.Events, cfg.Copies, r.Deliveries, cfg.InFlight, redactedURL(cfg.RedisURL), cfg.Prefix)
	fmt.Printf("wall %s: %.0f deliveries/s, %.0f calls/s (%d calls, retries included)\n",
		r.Wall.Round(time.Millisecond), float64(r.Deliveries)/r.Wall.Seconds(), float64(r.Attempts)/r.Wall.Seconds(), r.Attempts)
	fmt.Printf("latency per call: p50 %s, p99 %s, max %s\n",
		us(webhookfleet.Percentile(r.Latencies, 50)), us(webhookfleet.Percentile(r.Latencies, 99)), us(webhookfleet.Percentile(r.Latencies, 100)))
	fmt.Printf("first answers: %s\n", webhookfleet.FormatCounts(r.First))
	fmt.Printf("retries:       %s\n", webhookfleet.FormatCounts(r.Retries))
	fmt.Printf("executions counted from the sink's log lines: %d (results not stored: %d, unacknowledged deliveries: %d)\n",
		r.Executions, r.ResultNotStored, r.Unacknowledged)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

// redactedURL hides a password in a Redis URL.
func redactedURL(s string) string {
	o, err := redis.ParseURL(s)
	if err != nil || o.Password == "" {
		return s
	}
	return "redis://***@" + o.Addr
}

// cleanup unlinks every key under prefix.
func cleanup(ctx context.Context, url, prefix string) error {
	conn, err := redisconn.Open(ctx, redisconn.Settings{URL: url})
	if err != nil {
		return err
	}
	defer conn.Close()
	c := conn.Client
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+":*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
