package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
)

func TestLatenciesUseNearestRankInMicroseconds(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	p := latencies(ds)
	if p.N != 200 || p.P50 != 100 || p.P90 != 180 || p.P99 != 198 || p.Max != 200 || math.Abs(p.Mean-100.5) > 1e-9 {
		t.Fatalf("got %+v; want n=200 p50=100 p90=180 p99=198 max=200 mean=100.5", p)
	}
}

func TestCommandStatsDeltaPerRequest(t *testing.T) {
	before := parseCommandStats("# Commandstats\r\ncmdstat_set:calls=10,usec=5,usec_per_call=0.5\r\ncmdstat_info:calls=3,usec=1\r\n")
	after := parseCommandStats("# Commandstats\r\ncmdstat_set:calls=30,usec=9\r\ncmdstat_evalsha:calls=10,usec=9\r\ncmdstat_info:calls=9,usec=1\r\n")
	var p Phase
	p.perRequest(commandDelta(before, after), 10)
	if p.CmdsPerReq != 3 || p.Breakdown != "SET 2.00 + EVALSHA 1.00" {
		t.Fatalf("got %.2f (%s); want 3.00 (SET 2.00 + EVALSHA 1.00), INFO left out", p.CmdsPerReq, p.Breakdown)
	}
}

// testMeasurer measures against a private redis-server with small counts.
func testMeasurer(t *testing.T) *measurer {
	srv := testsupport.StartRedis(t)
	rs := &redisServer{port: srv.Port(), admin: srv.NewClient()}
	return &measurer{srv: rs, s: settings{N: 40, Warmup: 10, Conc: 6, Rounds: 3, ThrN: 60}, run: "test"}
}

// firstCommands is what the server counts for a first execution: two commands sent, the
// completion script's EVALSHA also running a GET and a SET.
const firstCommands = 4

// checkBudget checks the commands per request of each named phase: {sent, counted by the
// server}. Sent is the round-trip budget; the server also counts the GET and SET a first
// execution's EVALSHA runs inside the script.
func checkBudget(t *testing.T, phases map[string]Phase, budget map[string][2]float64) {
	t.Helper()
	for name, want := range budget {
		if p, ok := phases[name]; !ok || p.SentPerReq != want[0] || p.CmdsPerReq != want[1] {
			t.Errorf("%s: %.2f commands sent, %.2f counted by the server (%s) per request; want %.2f and %.2f",
				name, p.SentPerReq, p.CmdsPerReq, p.Breakdown, want[0], want[1])
		}
	}
}

func TestCoreCostsItsRoundTripBudgetAndRunsOncePerKey(t *testing.T) {
	m := testMeasurer(t)
	phases, err := m.measureCore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkBudget(t, phases, map[string][2]float64{
		"0 no-idempotency baseline":         {0, 0},
		"a first-time (unique keys)":        {2, firstCommands},
		"b replay, no local cache":          {1, 1},
		"i in-progress duplicate":           {1, 1},
		"b replay, local cache hit (warm)":  {0, 0},
		"b replay, local cache miss (cold)": {1, 1},
		"a first-time c=6":                  {2, firstCommands},
		"b replay c=6":                      {1, 1},
	})
	for _, name := range []string{"c concurrent same key, work 0ms", "c concurrent same key, work 20ms"} {
		p := phases[name]
		if p.Ran != 3 || p.PerKeyMin != 1 || p.PerKeyMax != 1 || p.Ran+p.InProgress+p.Stored != 18 || p.Other != 0 {
			t.Errorf("%s: %+v; want the business logic run once per key and every other caller rejected or replayed", name, p)
		}
	}
}

func TestWebhookHandlerCostsItsRoundTripBudget(t *testing.T) {
	m := testMeasurer(t)
	phases, err := m.measureHandler(context.Background(), m.s.Conc)
	if err != nil {
		t.Fatal(err)
	}
	checkBudget(t, phases, map[string][2]float64{
		"a first-time (unique keys)": {2, firstCommands},
		"b replay, no local cache":   {1, 1},
		"i in-progress duplicate":    {1, 1},
		"a first-time c=6":           {2, firstCommands},
		"b replay c=6":               {1, 1},
	})
}

// sampleReport is a report with the shape a real run produces.
func sampleReport(coreFirst float64) *Report {
	ph := func(p50, p99, cmds float64) Phase {
		return Phase{N: 10, P50: p50, P50Min: p50, P50Max: p50, P99: p99, CmdsPerReq: cmds, SentPerReq: min(cmds, 2)}
	}
	return &Report{
		Date: "2026-01-01 00:00 UTC", Host: "2 cores (test), Linux", Settings: settings{N: 10, Warmup: 1, Conc: 5, Rounds: 2, ThrN: 10}, Port: 6391,
		Server: "Redis 7.0.15", Base: "comparison",
		Impls: []Impl{
			{Key: keyCore, Label: "idem core", Phases: map[string]Phase{
				"a first-time (unique keys)": ph(coreFirst, 300, 2), "b replay, no local cache": ph(50, 90, 1), "i in-progress duplicate": ph(45, 80, 1)}},
			{Key: keyHandler, Label: "idem webhook <handler>", Phases: map[string]Phase{
				"a first-time (unique keys)": ph(150, 400, 2), "b replay, no local cache": ph(90, 200, 1), "i in-progress duplicate": ph(80, 150, 1)}},
			{Key: "powertools", Label: "Powertools", Phases: map[string]Phase{
				"a first-time (unique keys)": ph(400, 2800, 2), "b replay, no local cache": ph(350, 2400, 2),
				"c concurrent same key, work 20ms": {CmdsPerReq: 2, Keys: 2, PerKey: 5, WorkMs: 20, Ran: 2, InProgress: 8}}},
			{Key: "express", Label: "express + ioredis", Phases: map[string]Phase{
				"a first-time (unique keys)": ph(770, 2000, 2), "b replay": ph(780, 2300, 2),
				"c concurrent same key, work 20ms": {CmdsPerReq: 2, Keys: 2, PerKey: 5, WorkMs: 20, Ran: 2, Conflict409: 8}}},
		},
		Floors: []floorResult{{Client: "go-redis", Phases: map[string]Phase{"PING": ph(40, 90, 1)}}},
	}
}

func TestAggregateTakesMediansOverRuns(t *testing.T) {
	r := &Report{}
	for _, p50 := range []float64{300, 100, 200} {
		r.Runs = append(r.Runs, Run{Impls: []Impl{{Key: keyCore, Phases: map[string]Phase{
			"a first-time (unique keys)":      {P50: p50, P99: 2 * p50, CmdsPerReq: 4},
			"c concurrent same key, work 0ms": {Keys: 2, Ran: 2, InProgress: 3, PerKeyMin: 1, PerKeyMax: 1},
		}}}})
	}
	r.aggregate()
	p := r.Impls[0].Phases["a first-time (unique keys)"]
	if p.P50 != 200 || p.P99 != 400 || p.P50Min != 100 || p.P50Max != 300 || p.CmdsPerReq != 4 || p.Runs != 3 {
		t.Errorf("aggregated %+v; want p50 200 (100-300), p99 400, 4 commands, 3 runs", p)
	}
	c := r.Impls[0].Phases["c concurrent same key, work 0ms"]
	if c.Keys != 6 || c.Ran != 6 || c.InProgress != 9 || c.PerKeyMin != 1 || c.PerKeyMax != 1 {
		t.Errorf("aggregated concurrency %+v; want the counts of 3 runs summed", c)
	}
}

func TestChecksCompareWithPowertoolsAndTheLowestPeer(t *testing.T) {
	met := func(r *Report) []bool {
		var v []bool
		for _, c := range r.checks() {
			v = append(v, c.met)
		}
		return v
	}
	// first 100 vs 400: 4x; replay 50 vs 350: 7x; commands and round trips 2/1/1 against 2/2/2.
	if got := met(sampleReport(100)); len(got) != 8 || !allTrue(got) {
		t.Fatalf("checks %v; want 8, all met", got)
	}
	// first 200 vs 400: only 2x.
	if got := met(sampleReport(200)); len(got) != 8 || got[0] || !got[1] {
		t.Fatalf("checks %v; want the first-execution ratio not met, the replay ratio met", got)
	}
	// A first execution counted as 4 commands by the server, sent as 2.
	r := sampleReport(100)
	p := r.Impls[0].Phases["a first-time (unique keys)"]
	p.CmdsPerReq = 4
	r.Impls[0].Phases["a first-time (unique keys)"] = p
	if got := met(r); got[2] || !got[5] {
		t.Fatalf("checks %v; want first-execution commands (4 against 2) not met, round trips (2 against 2) met", got)
	}
}

func allTrue(v []bool) bool {
	for _, b := range v {
		if !b {
			return false
		}
	}
	return true
}

func TestReportWritesTablesAndWellFormedSVG(t *testing.T) {
	r := sampleReport(100)
	var md bytes.Buffer
	r.writeMarkdown(&md)
	for _, want := range []string{"| first execution: p50 (range) / p99 µs | 100 (100-100) / 300 | 150 (150-150) / 400 | 400 (400-400) / 2800 | 770 (770-770) / 2000 |",
		"2.00 (concurrency test)", "4.0x", "**met**", "2026-01-01 00:00 UTC", "2 cores (test)", "on Redis 7.0.15", "(comparison.svg)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("comparison.md lacks %q:\n%s", want, md.String())
		}
	}
	var svg bytes.Buffer
	if err := r.writeSVG(&svg); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&svg)
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("comparison.svg is not well-formed XML: %v", err)
		}
		if c, ok := tok.(xml.CharData); ok {
			texts = append(texts, string(c))
		}
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"idem webhook <handler>", "100 / 300", "2.00*", "first execution"} {
		if !strings.Contains(all, want) {
			t.Errorf("the plot lacks the text %q", want)
		}
	}
}
