// Command compare measures the idempotency core and the webhook function against the two peer
// implementations in the peers folder (Powertools for AWS Lambda TypeScript with its Redis
// persistence layer, and an express + ioredis Idempotency-Key middleware) in one invocation, on
// one private redis-server, with the same request counts and scenarios: first execution, replay,
// in-progress duplicate, concurrent duplicates, throughput. It measures everything -runs times,
// alternating whether the peers or ours go first, and reports medians. It writes
// docs/comparison.json (every number of every run), docs/comparison.md (the tables, date and
// machine) and docs/comparison.svg (the plot).
//
// Usage:
//
//	go run ./cmd/compare [-peers ../shared/peers] [-runs 5] [-port 6391] [-n 2000] [-warmup 2000] [-conc 50] [-rounds 20] [-thr-n 10000] [-out docs]
//	go run ./cmd/compare -replot     # redraw comparison.md and comparison.svg from comparison.json
//
// It copies the peers folder to a temporary directory (it may be read-only), installs the
// peers' locked npm dependencies there, starts redis-server on -port with the flags of the
// peers' run.sh (refusing a port that already answers), runs the peers' own bench.mjs and
// floor.mjs against it, then measures ours in-process against the same server. Redis
// commands per request are INFO commandstats deltas, as the peers count them. It needs
// redis-server, Node.js 20 or later and npm.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

func main() {
	var s settings
	peersDir := flag.String("peers", defaultPeersDir(), "the peers folder (copied, never written); env IDEM_PEERS_DIR")
	port := flag.Int("port", 6391, "port of the private redis-server every implementation is measured against")
	flag.IntVar(&s.N, "n", 2000, "sequential requests per path")
	flag.IntVar(&s.Warmup, "warmup", 2000, "requests per path before measuring")
	flag.IntVar(&s.Conc, "conc", 50, "requests in flight for throughput; simultaneous callers per key in the concurrency test")
	flag.IntVar(&s.Rounds, "rounds", 20, "keys in the concurrency test")
	flag.IntVar(&s.ThrN, "thr-n", 10000, "requests per throughput path")
	runs := flag.Int("runs", 5, "measurement runs, alternating which side goes first; the report shows medians")
	out := flag.String("out", "docs", "directory for comparison.json, comparison.md and comparison.svg")
	replot := flag.Bool("replot", false, "only redraw comparison.md and comparison.svg from comparison.json in -out")
	flag.Parse()

	var err error
	if *replot {
		err = redraw(*out)
	} else {
		err = run(context.Background(), s, *runs, *peersDir, *port, *out, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// defaultPeersDir is IDEM_PEERS_DIR, or ../shared/peers beside the repository.
func defaultPeersDir() string {
	if d := os.Getenv("IDEM_PEERS_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "shared", "peers")
}

// run measures everything and writes the report files into out.
func run(ctx context.Context, s settings, runs int, peersDir string, port int, out string, log io.Writer) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(log, "== copying %s and installing the peers' dependencies\n", peersDir)
	peers, err := copyPeers(ctx, peersDir, log)
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(peers))

	r := &Report{
		Date:       time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Host:       host(ctx),
		LoadBefore: loadAverage(),
		Settings:   s,
		Port:       port,
	}
	dir, err := os.MkdirTemp("", "idem-compare-redis-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := startRedis(port, dir)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(log, "== %s on 127.0.0.1:%d\n", srv.version(ctx), port)

	for run := range runs {
		impls, floors, err := measureOnce(ctx, srv, s, peers, port, run, log)
		if err != nil {
			return err
		}
		r.Runs = append(r.Runs, Run{Impls: impls, Floors: floors})
	}
	r.aggregate()
	r.LoadAfter = loadAverage()

	r.Versions = []string{
		srv.version(ctx),
		"Go " + strings.TrimPrefix(runtime.Version(), "go"),
		"go-redis " + moduleVersion("github.com/redis/go-redis/v9"),
		"Node.js " + strings.TrimPrefix(command(ctx, "node", "-v"), "v"),
	}
	for _, p := range peerList {
		r.Versions = append(r.Versions, npmVersions(ctx, peers, p)...)
	}

	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "comparison.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := r.write(out); err != nil {
		return err
	}
	fmt.Fprintln(log, "== wrote", filepath.Join(out, "comparison.{json,md,svg}"))
	for _, c := range r.checks() {
		verdict := "met"
		if !c.met {
			verdict = "NOT MET"
		}
		fmt.Printf("%s: %s\n", c.what, verdict)
	}
	return nil
}

// measureOnce runs every implementation once against srv: the client floors, then the peers
// and ours, ours first on odd runs so that neither side always runs on a warmer machine.
func measureOnce(ctx context.Context, srv *redisServer, s settings, peers string, port, run int, log io.Writer) ([]Impl, []floorResult, error) {
	var floors []floorResult
	m := &measurer{srv: srv, s: s, run: "cmp-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	fmt.Fprintf(log, "== run %d: floor: go-redis (redisconn)\n", run+1)
	goFloor, err := m.floor(ctx)
	if err != nil {
		return nil, nil, err
	}
	floors = append(floors, floorResult{Client: "go-redis " + moduleVersion("github.com/redis/go-redis/v9") + " (redisconn)", Phases: goFloor})
	for _, p := range peerList {
		fmt.Fprintf(log, "== run %d: floor: %s's client\n", run+1, p.dir)
		f, err := runFloor(ctx, peers, p, s, port)
		if err != nil {
			return nil, nil, err
		}
		floors = append(floors, f)
	}

	ours := func() ([]Impl, error) {
		fmt.Fprintf(log, "== run %d: idem core (in-process)\n", run+1)
		core, err := m.measureCore(ctx)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "== run %d: idem webhook handler (in-process)\n", run+1)
		hook, err := m.measureHandler(ctx, s.Conc)
		if err != nil {
			return nil, err
		}
		return []Impl{
			{Key: keyCore, Label: "idem core (in-process call)", Phases: core},
			{Key: keyHandler, Label: "idem Stripe webhook handler (in-process)", Phases: hook},
		}, nil
	}
	theirs := func() ([]Impl, error) {
		var impls []Impl
		for _, p := range peerList {
			fmt.Fprintf(log, "== run %d: peer: %s\n", run+1, p.label)
			phases, err := runPeer(ctx, peers, p, s, port, log)
			if err != nil {
				return nil, err
			}
			impls = append(impls, Impl{Key: p.key, Label: p.label, Phases: phases})
		}
		return impls, nil
	}
	var a, b []Impl
	if run%2 == 1 {
		if a, err = ours(); err == nil {
			b, err = theirs()
		}
	} else {
		if b, err = theirs(); err == nil {
			a, err = ours()
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return append(a, b...), floors, nil
}

// redraw rewrites comparison.md and comparison.svg from comparison.json in out.
func redraw(out string) error {
	b, err := os.ReadFile(filepath.Join(out, "comparison.json"))
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("comparison.json: %w", err)
	}
	return r.write(out)
}

// write writes comparison.md and comparison.svg into out.
func (r *Report) write(out string) error {
	md, err := os.Create(filepath.Join(out, "comparison.md"))
	if err != nil {
		return err
	}
	r.writeMarkdown(md)
	svg, err := os.Create(filepath.Join(out, "comparison.svg"))
	if err != nil {
		md.Close()
		return err
	}
	return errors.Join(r.writeSVG(svg), md.Close(), svg.Close())
}

// host describes the machine: cores, CPU model, kernel.
func host(ctx context.Context) string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s", runtime.NumCPU(), model, command(ctx, "uname", "-sr"))
}

// loadAverage returns the 1, 5 and 15 minute load averages, where the system reports them.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// moduleVersion returns the version of a module this binary was built with.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}
