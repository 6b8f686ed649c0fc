// Command benchreport reads `go test -bench` output of pkg/idem (and of the functions' handlers)
// and prints, per path, the median time per operation, its ratio to the floor measured in the
// same run (a bare SET NX for a first execution, a bare GET for a replay or an in-progress
// duplicate, the core's Do or DoBatch for a function's handler), allocations, and Redis
// commands per operation. A budgeted core path has a paired benchmark too (BenchmarkPair...: the
// path and its floor in alternating blocks on one server), and its budget holds against the
// median of the pairs' ratios when the input has them. With -max it fails when a ratio or an
// allocation count exceeds its budget.
//
// It lives in the bench module, beside the product's, so that golang.org/x/perf stays out of the
// product's go.mod. Usage, from the repository root (make bench does both):
//
//	go test -run '^$' -bench . -benchmem -count 6 ./pkg/idem | tee bench.txt
//	cd bench && go run ./benchreport ../bench.txt
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// path is one measured operation and the floor it is compared with.
type path struct {
	name, bench, floor string
	budget             float64
	// maxAllocs, when positive, bounds the path's median allocations per operation.
	maxAllocs float64
	// optional paths are left out when their results are missing (a run of only some
	// benchmarks).
	optional bool
	// pair, when set, names the paired benchmark of bench and floor (testsupport.BenchPair):
	// the budget holds against the median of its path/floor ratios, measured on one server in
	// alternating blocks, rather than against the ratio of two benchmarks' medians.
	pair string
}

var paths = []path{
	// The webhook function's request path (decode, verify, parse once, claim, forward, log) for a
	// 2 KB Stripe delivery, against the core's Do on the same server in the same round.
	{name: "webhook: first 2 KB Stripe delivery vs the core's first execution", bench: "WebhookStripeFirst", floor: "WebhookCoreFirst", budget: 1.3, maxAllocs: 150, optional: true},
	{name: "webhook: replayed 2 KB Stripe delivery vs the core's replay", bench: "WebhookStripeReplay", floor: "WebhookCoreReplay", budget: 2.0, maxAllocs: 150, optional: true},
	{name: "webhook core: first execution", bench: "WebhookCoreFirst", floor: "WebhookCoreFirst", optional: true},
	{name: "webhook core: replay", bench: "WebhookCoreReplay", floor: "WebhookCoreReplay", optional: true},
	// The payments function's create path (route, content type, key, body, claim, ledger,
	// respond, log), against the core's fenced Do (the function fences its claims).
	{name: "payments: payment created vs the core's first execution (fenced)", bench: "PaymentsCreateFirst", floor: "PaymentsCoreFirst", budget: 1.3, maxAllocs: 150, optional: true},
	{name: "payments: payment replayed vs the core's replay (fenced)", bench: "PaymentsCreateReplay", floor: "PaymentsCoreReplay", budget: 2.0, maxAllocs: 150, optional: true},
	{name: "payments core: first execution (fenced)", bench: "PaymentsCoreFirst", floor: "PaymentsCoreFirst", optional: true},
	{name: "payments core: replay (fenced)", bench: "PaymentsCoreReplay", floor: "PaymentsCoreReplay", optional: true},
	// The consumer's batch path (decode, key, fingerprint, claims, process, completions, log
	// lines) for 10 new 2 KB Stripe events, against the core's DoBatch of 10; at most 150
	// allocations per record, 1,500 per batch. Its budget is 3.0x, not 1.3x: each record's JSON
	// (reading the envelope and its event, fingerprinting provider, id and payload) is work
	// DoBatch has no part in, costing about what the core spends on the record (docs/benchmarks.md).
	{name: "consumer: SQS batch of 10 new events vs the core's DoBatch of 10", bench: "ConsumerBatch10", floor: "ConsumerCoreBatch10", budget: 3.0, maxAllocs: 1500, optional: true},
	{name: "consumer core: DoBatch of 10 new keys", bench: "ConsumerCoreBatch10", floor: "ConsumerCoreBatch10", optional: true},
	// The core's default path: a first execution at most 1.2x its hand-written floor (a bare SET
	// NX PX and a minimal Lua compare-and-set), a replay at most 1.15x a bare GET, a batch of 10
	// at most 1.15x its hand-written two-pipeline floor. Against one bare SET NX the rows are
	// shown without a budget: two round trips make 2x by themselves.
	{name: "first execution", bench: "FirstExecution", floor: "FloorSetNX"},
	{name: "replay", bench: "Replay", floor: "FloorGet", budget: 1.15, pair: "PairReplay"},
	{name: "in-progress duplicate", bench: "InProgress", floor: "FloorGet", budget: 1.3, pair: "PairInProgress"},
	{name: "first execution vs hand-written SET NX + minimal Lua CAS", bench: "FirstExecution", floor: "FloorClaimAndScript", budget: 1.2, pair: "PairFirstExecution"},
	{name: "batch of 10 first deliveries vs one bare SET NX", bench: "BatchFirstDelivery10", floor: "FloorSetNX", optional: true},
	{name: "batch of 10 first deliveries vs hand-written pipelined SET NX + Lua CAS", bench: "BatchFirstDelivery10", floor: "FloorBatchClaimAndScript10", budget: 1.15, optional: true, pair: "PairBatchFirstDelivery10"},
	{name: "SQS batch of 10 new records (idemsqs) vs one bare SET NX", bench: "SQSBatch10", floor: "FloorSetNX", budget: 3.0, optional: true},
	{name: "floor: bare SET NX", bench: "FloorSetNX", floor: "FloorSetNX"},
	{name: "floor: SET NX + minimal Lua CAS", bench: "FloorClaimAndScript", floor: "FloorClaimAndScript"},
	{name: "floor: 10 SET NX + 10 Lua CAS, 2 pipelines", bench: "FloorBatchClaimAndScript10", floor: "FloorBatchClaimAndScript10", optional: true},
	{name: "floor: bare GET", bench: "FloorGet", floor: "FloorGet"},
	// WithFencing: the claim is one script call (claim and token); its floor is one hand-written
	// EVALSHA doing the same work, then the minimal Lua CAS.
	{name: "fenced first execution vs hand-written fenced claim script + minimal Lua CAS", bench: "FencedFirstExecution", floor: "FloorFencedClaimAndScript", budget: 1.2, optional: true, pair: "PairFencedFirstExecution"},
	// Replica acknowledgement (IDEM_MIN_REPLICAS=1): the WAIT in the claim's round trip, against
	// the default path; no budget, it is an option.
	{name: "first execution with WAIT for 1 replica vs first execution", bench: "FirstExecutionMinReplicas1", floor: "FirstExecution", optional: true},
	{name: "floor: fenced claim script + minimal Lua CAS", bench: "FloorFencedClaimAndScript", floor: "FloorFencedClaimAndScript", optional: true},
	// The same batches and floor through a proxy adding 100 µs to each direction of a round trip
	// (a network like that between Lambda and ElastiCache in one VPC), beside the loopback rows.
	{name: "VPC proxy: batch of 10 first deliveries vs one bare SET NX", bench: "VPCBatchFirstDelivery10", floor: "VPCFloorSetNX", optional: true},
	{name: "VPC proxy: SQS batch of 10 new records (idemsqs) vs one bare SET NX", bench: "VPCSQSBatch10", floor: "VPCFloorSetNX", optional: true},
	{name: "VPC proxy floor: bare SET NX", bench: "VPCFloorSetNX", floor: "VPCFloorSetNX", optional: true},
	// The budgeted paths' pairs through the proxy, without a budget: where the network is the cost.
	{name: "VPC proxy: replay vs bare GET", bench: "VPCPairReplay", floor: "VPCPairReplay", optional: true, pair: "VPCPairReplay"},
	{name: "VPC proxy: first execution vs SET NX + minimal Lua CAS", bench: "VPCPairFirstExecution", floor: "VPCPairFirstExecution", optional: true, pair: "VPCPairFirstExecution"},
	{name: "VPC proxy: batch of 10 vs its two-pipeline floor", bench: "VPCPairBatchFirstDelivery10", floor: "VPCPairBatchFirstDelivery10", optional: true, pair: "VPCPairBatchFirstDelivery10"},
}

func main() {
	enforce := flag.Bool("max", false, "exit 1 if a path's ratio to its floor exceeds its budget")
	flag.Parse()
	var in io.Reader = os.Stdin
	name := "stdin"
	if flag.NArg() > 0 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(2)
		}
		defer f.Close()
		in, name = f, flag.Arg(0)
	}
	samples, err := read(in, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(2)
	}
	over, err := report(os.Stdout, samples)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(2)
	}
	if over && *enforce {
		os.Exit(1)
	}
}

// read collects every value of every unit per benchmark name (without the -GOMAXPROCS suffix).
func read(in io.Reader, name string) (map[string]map[string][]float64, error) {
	samples := map[string]map[string][]float64{}
	r := benchfmt.NewReader(in, name)
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		bench, _, _ := strings.Cut(strings.TrimPrefix(string(res.Name.Base()), "Benchmark"), "-")
		if samples[bench] == nil {
			samples[bench] = map[string][]float64{}
		}
		for _, v := range res.Values {
			samples[bench][v.Unit] = append(samples[bench][v.Unit], v.Value)
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if len(samples) == 0 {
		return nil, errors.New("no benchmark results in the input")
	}
	return samples, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report prints the table and tells whether a path went over its budget.
func report(w io.Writer, samples map[string]map[string][]float64) (bool, error) {
	over := false
	fmt.Fprintln(w, "| path | median µs/op | ratio of medians to floor | paired ratio (budget) | allocs/op | Redis cmds/op (sent) | round trips/op | server cmds/op | runs |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, p := range paths {
		s, f := samples[p.bench], samples[p.floor]
		if (s == nil || f == nil) && p.optional {
			continue
		}
		if s == nil || f == nil {
			return false, fmt.Errorf("missing results for %s or %s", p.bench, p.floor)
		}
		ns := median(s["sec/op"]) * 1e9
		ratio := median(s["sec/op"]) / median(f["sec/op"])
		ratioCell, pairCell := "-", "-"
		if p.bench != p.floor {
			ratioCell = fmt.Sprintf("%.2fx", ratio)
		}
		// The budget holds against the paired ratio when the run has it, else the medians'.
		judged, cell := ratio, &ratioCell
		if pr := samples[p.pair]["path/floor"]; p.pair != "" && len(pr) > 0 {
			judged, cell = median(pr), &pairCell
			pairCell = fmt.Sprintf("%.2fx", judged)
		}
		if p.budget > 0 {
			*cell += fmt.Sprintf(" (≤ %gx)", p.budget)
			if judged > p.budget {
				over = true
				*cell += " OVER"
			}
		}
		allocs := fmt.Sprintf("%.0f", median(s["allocs/op"]))
		if p.maxAllocs > 0 {
			allocs += fmt.Sprintf(" (≤ %.0f)", p.maxAllocs)
			if median(s["allocs/op"]) > p.maxAllocs {
				over = true
				allocs += " OVER"
			}
		}
		fmt.Fprintf(w, "| %s | %.1f | %s | %s | %s | %.2f | %.2f | %.2f | %d |\n", p.name, ns/1e3, ratioCell, pairCell,
			allocs, median(s["cmds/op"]), median(s["round-trips/op"]), median(s["server-cmds/op"]), len(s["sec/op"]))
	}
	return over, nil
}
