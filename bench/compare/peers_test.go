package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
)

// exactVersion is a version npm can only resolve to itself: no range, tag or URL.
var exactVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// Every peer pins exact versions, and its lockfile holds those versions, so npm ci installs
// what was measured.
func TestPeersPinExactVersionsInTheirLockfiles(t *testing.T) {
	for _, p := range peerList {
		dir := filepath.Join("..", "peers", p.dir)
		var pkg struct {
			Dependencies map[string]string `json:"dependencies"`
		}
		readJSON(t, filepath.Join(dir, "package.json"), &pkg)
		var lock struct {
			LockfileVersion int `json:"lockfileVersion"`
			Packages        map[string]struct {
				Version      string            `json:"version"`
				Dependencies map[string]string `json:"dependencies"`
			} `json:"packages"`
		}
		readJSON(t, filepath.Join(dir, "package-lock.json"), &lock)
		if len(pkg.Dependencies) == 0 || lock.LockfileVersion < 2 {
			t.Fatalf("%s: %d dependencies, lockfile version %d", p.dir, len(pkg.Dependencies), lock.LockfileVersion)
		}
		for name, version := range pkg.Dependencies {
			if !exactVersion.MatchString(version) {
				t.Errorf("%s: %s@%q is not an exact version", p.dir, name, version)
			}
			if root := lock.Packages[""].Dependencies[name]; root != version {
				t.Errorf("%s: the lockfile's root asks %s@%q, package.json %q", p.dir, name, root, version)
			}
			if locked := lock.Packages["node_modules/"+name].Version; locked != version {
				t.Errorf("%s: the lockfile installs %s@%q, package.json pins %q", p.dir, name, locked, version)
			}
		}
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// The peers' drivers, installed from their lockfiles and run with small counts against a
// private redis-server, report every phase the report reads, and the commands their sources
// issue: SET NX and a SET or GET on every path, nothing for a hit of Powertools' local cache, one
// execution per key under concurrent duplicates.
func TestPeerDriversReportThePhasesAndCommandsTheReportReads(t *testing.T) {
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			testsupport.Unavailable(t, "%s not found: %v", bin, err)
		}
	}
	srv := testsupport.StartRedis(t)
	ctx := context.Background()
	peers, err := installPeers(ctx, filepath.Join("..", "peers"), testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(peers.results) })
	s := settings{N: 30, Warmup: 10, Conc: 4, Rounds: 3, ThrN: 40}
	want := map[string]map[string]float64{
		"powertools": {
			"0 no-idempotency baseline": 0, "a first-time (unique keys)": 2, "b replay, no local cache": 2,
			"a first-time, local cache on": 2, "b replay, local cache hit (warm)": 0, "b replay, local cache miss (cold)": 2,
			"c concurrent same key, work 0ms": 2, "c concurrent same key, work 20ms": 2,
		},
		"express": {
			"0 no-idempotency baseline (HTTP)": 0, "a first-time (unique keys)": 2, "b replay": 2,
			"a first-time c=4": 2, "b replay c=4": 2, "autocannon replay c=4": 2,
			"c concurrent same key, work 0ms": 2, "c concurrent same key, work 20ms": 2,
		},
	}
	for _, p := range peerList {
		phases, err := runPeer(ctx, peers, p, s, srv.Port(), testWriter{t})
		if err != nil {
			t.Fatal(err)
		}
		checkPeerPhases(t, p.key, phases, want[p.key], s)
		f, err := runFloor(ctx, peers, p, s, srv.Port())
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"PING", "SET NX EX (new key)", "GET"} {
			if f.Client == "" || f.Phases[cmd].N != s.N {
				t.Errorf("%s floor: client %q, %s measured %d times, want %d", p.key, f.Client, cmd, f.Phases[cmd].N, s.N)
			}
		}
	}
}

// checkPeerPhases checks a peer's phases: each of want there with its commands per request, the
// concurrency phases running the business logic once per key, the headline phases measuring N
// requests.
func checkPeerPhases(t *testing.T, key string, phases map[string]Phase, want map[string]float64, s settings) {
	t.Helper()
	for name, cmds := range want {
		ph, ok := phases[name]
		if !ok {
			t.Errorf("%s: no phase %q", key, name)
			continue
		}
		if ph.CmdsPerReq != cmds {
			t.Errorf("%s %q: %.2f Redis commands per request (%s), want %.0f", key, name, ph.CmdsPerReq, ph.Breakdown, cmds)
		}
		if name[0] == 'c' && (ph.Ran != s.Rounds || ph.PerKeyMin != 1 || ph.PerKeyMax != 1) {
			t.Errorf("%s %q: ran the business logic %d times (%d to %d per key), want once for each of %d keys", key, name, ph.Ran, ph.PerKeyMin, ph.PerKeyMax, s.Rounds)
		}
	}
	for _, h := range headline {
		if name, ok := h.phases[key]; ok && phases[name].N != s.N {
			t.Errorf("%s %q (%s): %d requests measured, want %d", key, name, h.path, phases[name].N, s.N)
		}
	}
}

// testWriter sends a command's output to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b))
	return len(b), nil
}
