// Command compare measures the idempotency core and the webhook function against the two peer
// implementations in bench/peers (Powertools for AWS Lambda TypeScript with its Redis
// persistence layer, and an express + ioredis Idempotency-Key middleware) in one invocation, with
// the same request counts and scenarios: first execution, replay, in-progress duplicate,
// concurrent duplicates, throughput. Every implementation is measured against the same private
// redis-server (Redis 7, where the core stores results with its Lua script). It measures
// everything -runs times, alternating whether the peers or ours go first, and reports medians.
// It writes comparison.md (the tables, date and machine) and comparison.svg (the plot) into -out,
// and comparison.json (every number of every run) into -json.
//
// It lives in the bench module, beside the product's, so that its dependencies stay out of the
// product's go.mod. From the repository root (make compare):
//
//	cd bench && go run ./compare [-peers peers] [-runs 5] [-port 6391] [-n 2000] [-warmup 2000] [-conc 50] [-rounds 20] [-thr-n 10000] [-out ../docs] [-json results]
//	cd bench && go run ./compare -replot    # redraw the .md and .svg files from the .json files
//
// It installs each peer's locked npm dependencies in its folder (npm ci: the exact versions of
// its package-lock.json), starts a redis-server on -port with no persistence (refusing a port
// that already answers), runs the peers' bench.mjs and floor.mjs against it, then measures ours
// in-process against the same server. Redis commands per request are INFO commandstats deltas,
// as the peers count them. It needs redis-server, Node.js 20 or later and npm.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

func main() {
	var s settings
	peersDir := flag.String("peers", "peers", "the peers' folder (bench/peers, from bench/): each peer's npm dependencies are installed there")
	port := flag.Int("port", 6391, "port of the private redis-server every implementation is measured against")
	flag.IntVar(&s.N, "n", 2000, "sequential requests per path")
	flag.IntVar(&s.Warmup, "warmup", 2000, "requests per path before measuring")
	flag.IntVar(&s.Conc, "conc", 50, "requests in flight for throughput; simultaneous callers per key in the concurrency test")
	flag.IntVar(&s.Rounds, "rounds", 20, "keys in the concurrency test")
	flag.IntVar(&s.ThrN, "thr-n", 10000, "requests per throughput path")
	runs := flag.Int("runs", 5, "measurement runs per server, alternating which side goes first; the report shows medians")
	out := flag.String("out", filepath.Join("..", "docs"), "directory for the report's .md and .svg (the repository's docs/, from bench/)")
	jsonDir := flag.String("json", "results", "directory for the report's .json, every number of every run (bench/results, from bench/)")
	replot := flag.Bool("replot", false, "only redraw the .md and .svg files in -out from the .json files in -json")
	flag.Parse()

	var err error
	if *replot {
		err = redraw(*jsonDir, *out)
	} else {
		var sk serverKind
		sk, err = redisServerKind()
		if err == nil {
			err = run(context.Background(), s, *runs, *peersDir, sk, *port, files{md: *out, json: *jsonDir}, os.Stderr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// files are the directories the report goes to.
type files struct {
	md   string // the .md and .svg
	json string // the .json
}

// serverKind is the server the comparison runs on.
type serverKind struct {
	name string // redis
	bin  string
	base string // report file name without extension
}

// redisServerKind finds the redis-server binary the comparison starts.
func redisServerKind() (serverKind, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return serverKind{}, fmt.Errorf("redis-server not found (Debian: apt-get install -y redis-server): %w", err)
	}
	return serverKind{name: "redis", bin: bin, base: "comparison"}, nil
}

// run measures everything on the server and writes its report files.
func run(ctx context.Context, s settings, runs int, peersDir string, sk serverKind, port int, out files, log io.Writer) error {
	for _, d := range []string{out.md, out.json} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "== installing the peers' locked dependencies in %s (npm ci)\n", peersDir)
	peers, err := installPeers(ctx, peersDir, log)
	if err != nil {
		return err
	}
	defer os.RemoveAll(peers.results)
	if err := runOn(ctx, s, runs, peers, sk, port, out, log); err != nil {
		return fmt.Errorf("%s: %w", sk.name, err)
	}
	return nil
}

// runOn measures everything on one server and writes its report files into out.
func runOn(ctx context.Context, s settings, runs int, peers peerSet, sk serverKind, port int, out files, log io.Writer) error {
	r := &Report{
		Date:       time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Host:       host(ctx),
		LoadBefore: loadAverage(),
		Settings:   s,
		Port:       port,
		Base:       sk.base,
	}
	dir, err := os.MkdirTemp("", "idem-compare-"+sk.name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(sk.bin, port, dir)
	if err != nil {
		return err
	}
	defer srv.stop()
	r.Server = srv.version(ctx)
	fmt.Fprintf(log, "== %s on 127.0.0.1:%d\n", r.Server, port)

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
		r.Server,
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
	if err := os.WriteFile(filepath.Join(out.json, sk.base+".json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := r.write(out.md); err != nil {
		return err
	}
	fmt.Fprintln(log, "== wrote", filepath.Join(out.md, sk.base+".{md,svg}"), "and", filepath.Join(out.json, sk.base+".json"))
	for _, c := range r.checks() {
		verdict := "met"
		if !c.met {
			verdict = "NOT MET"
		}
		fmt.Printf("%s: %s: %s\n", r.Server, c.what, verdict)
	}
	return nil
}

// measureOnce runs every implementation once against srv: the client floors, then the peers
// and ours, ours first on odd runs so that neither side always runs on a warmer machine.
func measureOnce(ctx context.Context, srv *redisServer, s settings, peers peerSet, port, run int, log io.Writer) ([]Impl, []floorResult, error) {
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

// redraw rewrites every report's .md and .svg in out from its .json in jsonDir.
func redraw(jsonDir, out string) error {
	files, err := filepath.Glob(filepath.Join(jsonDir, "comparison*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no comparison*.json in %s", jsonDir)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if r.Base == "" {
			r.Base = strings.TrimSuffix(filepath.Base(f), ".json")
		}
		if err := r.write(out); err != nil {
			return err
		}
	}
	return nil
}

// write writes the report's .md and .svg into out.
func (r *Report) write(out string) error {
	md, err := os.Create(filepath.Join(out, r.Base+".md"))
	if err != nil {
		return err
	}
	r.writeMarkdown(md)
	svg, err := os.Create(filepath.Join(out, r.Base+".svg"))
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
