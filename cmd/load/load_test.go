package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
)

// TestLoadExecutesEveryEventExactlyOnce is make load in small: 4 environments, 100 events each
// delivered 10 times at once, on the shared Redis; the executions counted from the sinks' log
// lines must be exactly one per event.
func TestLoadExecutesEveryEventExactlyOnce(t *testing.T) {
	testsupport.SharedRedis(t)
	cfg := Config{
		RedisURL:     "redis://" + testsupport.SharedRedisAddr(),
		Prefix:       testsupport.UniquePrefix(t),
		Environments: 4,
		Events:       100,
		Copies:       10,
		InFlight:     8,
		Invocation:   3 * time.Second,
		RetryEvery:   20 * time.Millisecond,
		GiveUp:       time.Minute,
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Check(cfg.Events); err != nil {
		t.Fatal(err)
	}
	if res.Deliveries != 1000 || res.First["executed"] != 100 {
		t.Errorf("deliveries %d, first answers %s; want 1000 deliveries and exactly 100 executed", res.Deliveries, webhookfleet.FormatCounts(res.First))
	}
	var first int
	for _, n := range res.First {
		first += n
	}
	if first != res.Deliveries || res.Attempts != first+sum(res.Retries) || len(res.Latencies) != res.Attempts {
		t.Errorf("first answers %d, retries %d, calls %d, latencies %d: the counts do not add up",
			first, sum(res.Retries), res.Attempts, len(res.Latencies))
	}
	if res.Retries["executed"] != 0 {
		t.Errorf("a retry executed an event: %s", webhookfleet.FormatCounts(res.Retries))
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestCheckReportsDuplicatesAndMissingEvents(t *testing.T) {
	r := &Result{Executions: 4, PerEvent: map[string]int{"a": 2, "b": 1, "c": 1}}
	err := r.Check(4)
	if err == nil || !strings.Contains(err.Error(), "1 events executed more than once") || !strings.Contains(err.Error(), "1 events never executed") {
		t.Fatalf("Check: %v; want a duplicate and a missing event reported", err)
	}
	r = &Result{Executions: 2, PerEvent: map[string]int{"a": 1, "b": 1}}
	if err := r.Check(2); err != nil {
		t.Fatalf("Check of an exact run: %v", err)
	}
}

func TestCountSinkLinesRejectsOtherLines(t *testing.T) {
	per := map[string]int{}
	n, err := countSinkLines(strings.NewReader(`{"provider":"stripe","id":"evt_1","body":{"id":"evt_1"}}`+"\n"), per)
	if err != nil || n != 1 || per["evt_1"] != 1 {
		t.Fatalf("got %d, %v, %v; want one line for evt_1", n, per, err)
	}
	if _, err := countSinkLines(strings.NewReader(`{"msg":"request","outcome":"executed"}`+"\n"), per); err == nil {
		t.Fatal("a request log line was counted as an execution")
	}
}
