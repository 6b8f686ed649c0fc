package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Report is everything one run measured; bench/results/comparison.json holds it, and the Markdown
// table and the plot are drawn from it.
type Report struct {
	Date       string   `json:"date"`
	Host       string   `json:"host"`
	LoadBefore string   `json:"loadBefore"`
	LoadAfter  string   `json:"loadAfter"`
	Versions   []string `json:"versions"`
	Settings   settings `json:"settings"`
	Port       int      `json:"port"`
	// Server is the server measured against, "Redis 7.0.15" or "Valkey 8.1.1"; Base the report
	// files' name without extension.
	Server string `json:"server"`
	Base   string `json:"base"`
	// Impls and Floors are the medians over Runs (see aggregate).
	Impls  []Impl        `json:"implementations"`
	Floors []floorResult `json:"floors"`
	Runs   []Run         `json:"runs"`
}

// Run is what one measurement run produced.
type Run struct {
	Impls  []Impl        `json:"implementations"`
	Floors []floorResult `json:"floors"`
}

// aggregate sets Impls and Floors from Runs: per implementation and path, the median over the
// runs of every latency and rate, the range of p50, and the concurrency counts summed.
func (r *Report) aggregate() {
	r.Impls, r.Floors = nil, nil
	if len(r.Runs) == 0 {
		return
	}
	for i, im := range r.Runs[0].Impls {
		agg := Impl{Key: im.Key, Label: im.Label, Phases: map[string]Phase{}}
		for name := range im.Phases {
			var ps []Phase
			for _, run := range r.Runs {
				if i < len(run.Impls) && run.Impls[i].Key == im.Key {
					if ph, ok := run.Impls[i].Phases[name]; ok {
						ps = append(ps, ph)
					}
				}
			}
			agg.Phases[name] = medianPhase(ps)
		}
		r.Impls = append(r.Impls, agg)
	}
	for i, f := range r.Runs[0].Floors {
		agg := floorResult{Client: f.Client, Phases: map[string]Phase{}}
		for name := range f.Phases {
			var ps []Phase
			for _, run := range r.Runs {
				if i < len(run.Floors) {
					if ph, ok := run.Floors[i].Phases[name]; ok {
						ps = append(ps, ph)
					}
				}
			}
			agg.Phases[name] = medianPhase(ps)
		}
		r.Floors = append(r.Floors, agg)
	}
}

// medianPhase combines the same path's phases from several runs.
func medianPhase(ps []Phase) Phase {
	if len(ps) == 0 {
		return Phase{}
	}
	med := func(f func(Phase) float64) float64 {
		v := make([]float64, len(ps))
		for i, p := range ps {
			v[i] = f(p)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	out := ps[0]
	out.Runs = len(ps)
	out.P50 = med(func(p Phase) float64 { return p.P50 })
	out.P90 = med(func(p Phase) float64 { return p.P90 })
	out.P99 = med(func(p Phase) float64 { return p.P99 })
	out.Max = med(func(p Phase) float64 { return p.Max })
	out.Mean = med(func(p Phase) float64 { return p.Mean })
	out.RPS = med(func(p Phase) float64 { return p.RPS })
	out.CmdsPerReq = med(func(p Phase) float64 { return p.CmdsPerReq })
	out.SentPerReq = med(func(p Phase) float64 { return p.SentPerReq })
	out.P50Min, out.P50Max = ps[0].P50, ps[0].P50
	if out.LatencyMs != nil {
		l := *out.LatencyMs
		l.P50 = med(func(p Phase) float64 { return p.LatencyMs.P50 })
		l.P99 = med(func(p Phase) float64 { return p.LatencyMs.P99 })
		out.LatencyMs = &l
	}
	for _, p := range ps[1:] {
		out.P50Min, out.P50Max = min(out.P50Min, p.P50), max(out.P50Max, p.P50)
		out.Keys += p.Keys
		out.Ran += p.Ran
		out.InProgress += p.InProgress
		out.Stored += p.Stored
		out.Other += p.Other
		out.Conflict409 += p.Conflict409
		out.Replayed200 += p.Replayed200
		out.PerKeyMin, out.PerKeyMax = min(out.PerKeyMin, p.PerKeyMin), max(out.PerKeyMax, p.PerKeyMax)
	}
	return out
}

// Keys of the implementations in a Report.
const (
	keyCore    = "idem-core"
	keyHandler = "idem-webhook"
)

// impl returns the implementation with key, if measured.
func (r *Report) impl(key string) (Impl, bool) {
	i := slices.IndexFunc(r.Impls, func(im Impl) bool { return im.Key == key })
	if i < 0 {
		return Impl{}, false
	}
	return r.Impls[i], true
}

// The paths every implementation is compared on, and the phase that measures each one per
// implementation. The peers measure in-progress duplicates only in their concurrency test.
var headline = []struct {
	path   string
	phases map[string]string
}{
	{"first execution", map[string]string{
		keyCore: "a first-time (unique keys)", keyHandler: "a first-time (unique keys)",
		"powertools": "a first-time (unique keys)", "express": "a first-time (unique keys)"}},
	{"replay", map[string]string{
		keyCore: "b replay, no local cache", keyHandler: "b replay, no local cache",
		"powertools": "b replay, no local cache", "express": "b replay"}},
	{"in-progress duplicate", map[string]string{
		keyCore: "i in-progress duplicate", keyHandler: "i in-progress duplicate"}},
}

// cmdsPhase is, per implementation, the phase whose Redis commands per request stand for an
// in-progress duplicate: the peers' concurrency test with 20 ms of work, where almost every
// caller is rejected as in progress.
var cmdsPhase = map[string]string{"powertools": "c concurrent same key, work 20ms", "express": "c concurrent same key, work 20ms"}

// sentPerReq returns the commands an implementation's client sent per request: measured for
// ours, and equal to the INFO commandstats count for the peers, which send neither Lua scripts
// nor pipelines (see their MONITOR captures).
func sentPerReq(key string, ph Phase) float64 {
	if key == keyCore || key == keyHandler {
		return ph.SentPerReq
	}
	return ph.CmdsPerReq
}

// check is one required outcome and whether this run met it.
type check struct {
	what string
	met  bool
}

// checks evaluates the required outcomes: first-execution and replay p50 latency of the core at
// least 3x lower than Powertools', and Redis commands per request no more than the lowest peer's
// on every headline path.
func (r *Report) checks() []check {
	var out []check
	core, ok1 := r.impl(keyCore)
	pt, ok2 := r.impl("powertools")
	if ok1 && ok2 {
		for _, h := range headline[:2] {
			ours, theirs := core.Phases[h.phases[keyCore]], pt.Phases[h.phases["powertools"]]
			if ours.P50 <= 0 || theirs.P50 <= 0 {
				continue
			}
			ratio := theirs.P50 / ours.P50
			out = append(out, check{
				what: fmt.Sprintf("%s: Powertools p50 %s µs / idem core p50 %s µs = %.1fx (p99: %s / %s µs = %.1fx); required: at least 3x",
					h.path, us(theirs.P50), us(ours.P50), ratio, us(theirs.P99), us(ours.P99), theirs.P99/ours.P99),
				met: ratio >= 3,
			})
		}
	}
	if !ok1 {
		return out
	}
	for _, metric := range []struct {
		name string
		of   func(key string, ph Phase) float64
	}{
		{"Redis commands per request (INFO commandstats, commands a Lua script calls included)", func(_ string, ph Phase) float64 { return ph.CmdsPerReq }},
		{"commands sent per request (round trips)", sentPerReq},
	} {
		for _, h := range headline {
			ours := metric.of(keyCore, core.Phases[h.phases[keyCore]])
			lowest, who := -1.0, ""
			for _, p := range peerList {
				im, ok := r.impl(p.key)
				if !ok {
					continue
				}
				name := h.phases[p.key]
				if name == "" {
					name = cmdsPhase[p.key]
				}
				if v := metric.of(p.key, im.Phases[name]); lowest < 0 || v < lowest {
					lowest, who = v, p.key
				}
			}
			if lowest < 0 {
				continue
			}
			out = append(out, check{
				what: fmt.Sprintf("%s, %s: idem core %.2f, lowest peer (%s) %.2f; required: no more",
					h.path, metric.name, ours, who, lowest),
				met: ours <= lowest+1e-9,
			})
		}
	}
	return out
}

// writeMarkdown writes the report as Markdown (docs/comparison.md).
//
//cyclo:one section after another of a generated document, read as the document reads
func (r *Report) writeMarkdown(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("# idem against Powertools for AWS Lambda (TypeScript) and express + ioredis, on %s", r.server())
	p("")
	p("Measured by `make compare` (`bench/compare`) on %s. All four were measured in one invocation against", r.Date)
	p("the same private %s server on 127.0.0.1:%d (loopback only, no persistence),", r.server(), r.Port)
	p("one after the other, with the same request counts, in %d runs that alternate whether the peers or", len(r.Runs))
	p("ours go first; every figure below is the median over the runs, with the range of p50 where shown.")
	p("The peers ran their drivers in `bench/peers` (`bench.mjs`, `floor.mjs`), their npm dependencies")
	p("installed from their lockfiles. Redis commands per request come from `INFO commandstats` deltas,")
	p("for the peers and ours alike; latencies are per request, measured by each driver around one call.")
	p("")
	p("- Host: %s; load average before %s, after %s.", r.Host, r.LoadBefore, r.LoadAfter)
	p("- Versions: %s.", strings.Join(r.Versions, ", "))
	p("- Settings: N=%d sequential requests per path after WARMUP=%d, CONC=%d, ROUNDS=%d, THR_N=%d.",
		r.Settings.N, r.Settings.Warmup, r.Settings.Conc, r.Settings.Rounds, r.Settings.ThrN)
	p("")
	p("![p50 latency per request and Redis commands per request](%s.svg)", r.Base)
	p("")
	p("## Headline")
	p("")
	p("Latency per request, Redis commands per request as `INFO commandstats` counts them (the peers'")
	p("metric; it also counts each command a Lua script calls), and commands the client sent per request,")
	p("which are its round trips.")
	p("")
	header := "| path |"
	sep := "|---|"
	for _, im := range r.Impls {
		header += " " + im.Label + " |"
		sep += "---:|"
	}
	p("%s", header)
	p("%s", sep)
	for _, h := range headline {
		row := "| " + h.path + ": p50 (range) / p99 µs |"
		cmds := "| " + h.path + ": Redis commands/request (commandstats) |"
		sent := "| " + h.path + ": commands sent/request (round trips) |"
		for _, im := range r.Impls {
			name, ok := h.phases[im.Key]
			if !ok {
				row += " (only measured concurrently) |"
				if c, ok := im.Phases[cmdsPhase[im.Key]]; ok {
					cmds += fmt.Sprintf(" %.2f (concurrency test) |", c.CmdsPerReq)
					sent += fmt.Sprintf(" %.2f (concurrency test) |", sentPerReq(im.Key, c))
				} else {
					cmds += " |"
					sent += " |"
				}
				continue
			}
			ph := im.Phases[name]
			row += fmt.Sprintf(" %s (%s-%s) / %s |", us(ph.P50), us(ph.P50Min), us(ph.P50Max), us(ph.P99))
			cmds += fmt.Sprintf(" %.2f |", ph.CmdsPerReq)
			sent += fmt.Sprintf(" %.2f |", sentPerReq(im.Key, ph))
		}
		p("%s", row)
		p("%s", cmds)
		p("%s", sent)
	}
	p("")
	p("Required outcomes, checked on this run:")
	p("")
	for _, c := range r.checks() {
		verdict := "**met**"
		if !c.met {
			verdict = "**not met**"
		}
		p("- %s: %s.", c.what, verdict)
	}
	p("")
	p("## Every path")
	p("")
	p("| implementation | path | p50 µs (range) | p90 µs | p99 µs | req/s | Redis cmds/req (commandstats) | sent/req |")
	p("|---|---|---:|---:|---:|---:|---|---:|")
	for _, im := range r.Impls {
		for _, name := range slices.SortedFunc(maps.Keys(im.Phases), byPath) {
			ph := im.Phases[name]
			if strings.HasPrefix(name, "c ") {
				continue
			}
			if ph.LatencyMs != nil {
				p("| %s | %s | %s ms | | %s ms | %.0f | %s | %.2f |", im.Label, name, num(ph.LatencyMs.P50), num(ph.LatencyMs.P99), ph.RPS, cmds(ph), sentPerReq(im.Key, ph))
				continue
			}
			rps := ""
			if ph.RPS > 0 {
				rps = fmt.Sprintf("%.0f", ph.RPS)
			}
			p("| %s | %s | %s (%s-%s) | %s | %s | %s | %s | %.2f |", im.Label, name, us(ph.P50), us(ph.P50Min), us(ph.P50Max),
				us(ph.P90), us(ph.P99), rps, cmds(ph), sentPerReq(im.Key, ph))
		}
	}
	p("")
	p("Paths named `c=%d` keep %d requests in flight in one process (ours: one client whose pool holds", r.Settings.Conc, r.Settings.Conc)
	p("%d connections; express: %d keep-alive HTTP connections); req/s is requests over wall time.", r.Settings.Conc, r.Settings.Conc)
	p("")
	p("## Concurrency: %d new keys per run, %d simultaneous invocations per key", r.Settings.Rounds, r.Settings.Conc)
	p("")
	p("Each invocation of a key comes from its own environment (ours: its own client and guard; Powertools: its own")
	p("client and persistence layer; express: its own HTTP request). Counts are totals over the %d runs.", len(r.Runs))
	p("")
	p("| implementation | business-logic time | ran business logic (per key) | in-progress rejections | stored result returned | errors | Redis cmds/req |")
	p("|---|---|---:|---:|---:|---:|---|")
	for _, im := range r.Impls {
		for _, name := range slices.SortedFunc(maps.Keys(im.Phases), byPath) {
			if !strings.HasPrefix(name, "c ") {
				continue
			}
			ph := im.Phases[name]
			p("| %s | %d ms | %d (%d-%d) | %d | %d | %d | %s |", im.Label, ph.WorkMs, ph.Ran, ph.PerKeyMin, ph.PerKeyMax,
				ph.rejected(), ph.stored(), ph.Other, cmds(ph))
		}
	}
	p("")
	p("## Client floor: one command, sequential, one connection")
	p("")
	p("| client | command | p50 (µs) | p99 (µs) |")
	p("|---|---|---:|---:|")
	for _, f := range r.Floors {
		for _, name := range []string{"PING", "SET NX EX (new key)", "GET"} {
			if ph, ok := f.Phases[name]; ok {
				p("| %s | %s | %s | %s |", f.Client, name, us(ph.P50), us(ph.P99))
			}
		}
	}
	p("")
	p("## How to read it")
	p("")
	p("- idem core: `pkg/idem`'s `Guard.Do` wrapped around the peers' business logic exactly as Powertools'")
	p("  `makeIdempotent` wraps it: key = the body's `id`, fingerprint = SHA-256 of the canonical JSON body,")
	p("  called in-process with a 30 s deadline like the peers' fake Lambda context, on a client built by")
	p("  `redisconn.Open` with the functions' production settings. Comparable with the Powertools rows.")
	p("- idem webhook handler: the Stripe webhook function's `Handle`, in-process, per signed delivery:")
	p("  signature check, event parsing, the core, the log sink and the request's JSON log line. It does")
	p("  more than the core row, and more than either peer.")
	p("- express rows include a Node HTTP client and server on loopback; compare them with their own")
	p("  no-idempotency baseline row, and compare Redis commands across all.")
	p("- The machine has 2 shared cores that also ran the drivers and, at times, other builds; p99 moves")
	p("  by 2x and more between runs, p50 by up to about 50%%: read the p50 ranges. Commands per request")
	p("  are exact and do not move.")
	p("- A first execution costs idem two round trips: one `SET NX PX GET` and one `EVALSHA` of the")
	p("  complete script, which itself calls `GET` and `SET` to store the result only while the claim is")
	p("  still its own; `INFO commandstats` counts those two as well, hence 4 commands per first")
	p("  execution against the peers' 2.")
	p("- The peers store their result with an unconditional `SET`, so a late owner can overwrite a newer")
	p("  claim. A replay and an in-progress duplicate cost idem one `SET NX PX GET`; both peers pay")
	p("  `SET NX` plus a `GET` or `SET` on every path.")
}

// server names the server measured against; reports written before the field existed were all
// measured on Redis.
func (r *Report) server() string {
	if r.Server == "" {
		return "Redis"
	}
	return r.Server
}

// byPath orders path names: the baseline, the sequential paths, the local-cache paths, then the
// throughput paths, each group alphabetically.
func byPath(a, b string) int {
	group := func(name string) int {
		switch {
		case strings.HasPrefix(name, "0 ") && !strings.Contains(name, "c="):
			return 0
		case strings.Contains(name, "c="), strings.HasPrefix(name, "autocannon"):
			return 3
		case strings.Contains(name, "local cache") && !strings.Contains(name, "no local cache"):
			return 2
		}
		return 1
	}
	if ga, gb := group(a), group(b); ga != gb {
		return ga - gb
	}
	return strings.Compare(a, b)
}

// us formats microseconds without decimals.
func us(v float64) string { return fmt.Sprintf("%.0f", v) }

// num formats a number with at most one decimal.
func num(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") }

// cmds formats commands per request with their breakdown.
func cmds(ph Phase) string {
	if ph.Breakdown == "" {
		return fmt.Sprintf("%.2f", ph.CmdsPerReq)
	}
	return fmt.Sprintf("%.2f (%s)", ph.CmdsPerReq, ph.Breakdown)
}
