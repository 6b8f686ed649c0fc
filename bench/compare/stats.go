package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Phase is one measured path of one implementation, in the shape of the peers' results JSON
// (latencies in microseconds), so peers and ours print with the same code.
type Phase struct {
	N          int     `json:"n"`
	P50        float64 `json:"p50"`
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	Max        float64 `json:"max"`
	Mean       float64 `json:"mean"`
	RPS        float64 `json:"rps,omitempty"`
	Workers    int     `json:"workers,omitempty"`
	CmdsPerReq float64 `json:"cmdsPerReq"`
	// SentPerReq is the commands the client sent per request (its round trips); ours only.
	// The peers send no Lua and no pipelines, so theirs equals CmdsPerReq.
	SentPerReq float64          `json:"sentPerReq,omitempty"`
	Breakdown  string           `json:"breakdown,omitempty"`
	Commands   map[string]int64 `json:"commands,omitempty"`

	// The concurrency test: Keys keys, each requested by PerKey callers at once.
	Keys        int `json:"keys,omitempty"`
	PerKey      int `json:"invocationsPerKey,omitempty"`
	WorkMs      int `json:"workMs,omitempty"`
	Ran         int `json:"ranBusinessLogic,omitempty"`
	InProgress  int `json:"inProgressErrors,omitempty"`
	Stored      int `json:"returnedStoredResult,omitempty"`
	Other       int `json:"otherErrors,omitempty"`
	PerKeyMin   int `json:"executionsPerKeyMin,omitempty"`
	PerKeyMax   int `json:"executionsPerKeyMax,omitempty"`
	Conflict409 int `json:"conflict409,omitempty"`
	Replayed200 int `json:"replayed200,omitempty"`

	// Runs is how many runs a median was taken over, and P50Min and P50Max the range of p50.
	Runs   int     `json:"runs,omitempty"`
	P50Min float64 `json:"p50Min,omitempty"`
	P50Max float64 `json:"p50Max,omitempty"`

	// Express's autocannon row reports milliseconds instead.
	LatencyMs *struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latencyMs,omitempty"`
}

// rejected returns the in-progress rejections of a concurrency phase, whatever the peer calls them.
func (p Phase) rejected() int { return p.InProgress + p.Conflict409 }

// stored returns the stored results returned by a concurrency phase.
func (p Phase) stored() int { return p.Stored + p.Replayed200 }

// Impl is one implementation's phases, by name.
type Impl struct {
	Key    string           `json:"key"`
	Label  string           `json:"label"`
	Phases map[string]Phase `json:"phases"`
}

// latencies summarises durations the way the peers' stats.mjs does: nearest rank, in
// microseconds.
func latencies(ds []time.Duration) Phase {
	if len(ds) == 0 {
		return Phase{}
	}
	s := make([]float64, len(ds))
	var sum float64
	for i, d := range ds {
		s[i] = float64(d) / float64(time.Microsecond)
		sum += s[i]
	}
	slices.Sort(s)
	pick := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Phase{N: len(s), P50: pick(50), P90: pick(90), P99: pick(99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// perRequest sets CmdsPerReq and Breakdown from a command delta over n requests, in the
// format of the peers' perRequest ("SET 1.00 + EVALSHA 1.00").
func (p *Phase) perRequest(delta map[string]int64, n int) {
	var total int64
	for _, v := range delta {
		total += v
	}
	p.Commands = delta
	p.CmdsPerReq = float64(total) / float64(n)
	names := slices.SortedFunc(maps.Keys(delta), func(a, b string) int {
		return cmp.Or(cmp.Compare(delta[b], delta[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, c := range names {
		parts[i] = fmt.Sprintf("%s %.2f", strings.ToUpper(c), float64(delta[c])/float64(n))
	}
	p.Breakdown = strings.Join(parts, " + ")
}
