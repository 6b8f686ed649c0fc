package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// peer is one of the two implementations in bench/peers.
type peer struct {
	key, label string
	dir        string // its folder in bench/peers
	results    string // the JSON its bench.mjs writes into RESULTS_DIR
}

// peerList is what bench/peers holds, in the order they are measured.
var peerList = []peer{
	{key: "powertools", label: "Powertools TS 2.35 (in-process call)", dir: "powertools-ts", results: "powertools.json"},
	{key: "express", label: "express 5 + ioredis (HTTP, loopback)", dir: "express-ioredis", results: "express.json"},
}

// peerSet is the peers' folder, their dependencies installed, and the directory their drivers
// write their results to.
type peerSet struct {
	dir     string
	results string
}

// installPeers installs each peer's locked dependencies in its folder with npm ci, which takes
// exactly the versions of its package-lock.json (and fails if package.json disagrees with it),
// and makes a temporary directory for the drivers' results.
func installPeers(ctx context.Context, dir string, log io.Writer) (peerSet, error) {
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			return peerSet{}, fmt.Errorf("%s not found (Node.js 20 or later with npm is needed to run the peers): %w", bin, err)
		}
	}
	for _, p := range peerList {
		if _, err := os.Stat(filepath.Join(dir, p.dir, "package-lock.json")); err != nil {
			return peerSet{}, fmt.Errorf("peer %s: %w", p.dir, err)
		}
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = filepath.Join(dir, p.dir)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return peerSet{}, fmt.Errorf("npm ci in %s: %w", cmd.Dir, err)
		}
	}
	res, err := os.MkdirTemp("", "idem-compare-peers-")
	if err != nil {
		return peerSet{}, err
	}
	return peerSet{dir: dir, results: res}, nil
}

// peerEnv is the environment of the peers' scripts: the same knobs and Redis port as ours, and
// where to write their results.
func peerEnv(s settings, port int, results string) []string {
	return append(os.Environ(),
		"N="+strconv.Itoa(s.N), "WARMUP="+strconv.Itoa(s.Warmup), "CONC="+strconv.Itoa(s.Conc),
		"ROUNDS="+strconv.Itoa(s.Rounds), "THR_N="+strconv.Itoa(s.ThrN), "FLOOR_N="+strconv.Itoa(s.N),
		"REDIS_PORT="+strconv.Itoa(port), "RESULTS_DIR="+results)
}

// runPeer runs the peer's bench.mjs against the server on port and reads the phases it wrote.
func runPeer(ctx context.Context, peers peerSet, p peer, s settings, port int, log io.Writer) (map[string]Phase, error) {
	out := filepath.Join(peers.results, p.results)
	if err := os.Remove(out); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", "bench.mjs")
	cmd.Dir = filepath.Join(peers.dir, p.dir)
	cmd.Env = peerEnv(s, port, peers.results)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s bench.mjs: %w", p.dir, err)
	}
	return readPeerResults(out)
}

// readPeerResults reads the phases a peer's bench.mjs wrote.
func readPeerResults(file string) (map[string]Phase, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out struct {
		Phases map[string]Phase `json:"phases"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(out.Phases) == 0 {
		return nil, fmt.Errorf("%s: no phases", file)
	}
	return out.Phases, nil
}

// floorResult is what a peer's floor.mjs prints on its last line: its client's name and the
// sequential latency of single commands.
type floorResult struct {
	Client string
	Phases map[string]Phase
}

// runFloor runs the peer's floor.mjs against the server on port.
func runFloor(ctx context.Context, peers peerSet, p peer, s settings, port int) (floorResult, error) {
	cmd := exec.CommandContext(ctx, "node", "floor.mjs")
	cmd.Dir = filepath.Join(peers.dir, p.dir)
	cmd.Env = peerEnv(s, port, peers.results)
	out, err := cmd.Output()
	if err != nil {
		return floorResult{}, fmt.Errorf("%s floor.mjs: %w", p.dir, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &raw); err != nil {
		return floorResult{}, fmt.Errorf("%s floor.mjs output: %w", p.dir, err)
	}
	r := floorResult{Phases: map[string]Phase{}}
	for k, v := range raw {
		if k == "client" {
			_ = json.Unmarshal(v, &r.Client)
			continue
		}
		var ph Phase
		if err := json.Unmarshal(v, &ph); err == nil {
			r.Phases[k] = ph
		}
	}
	return r, nil
}

// npmVersions returns `npm ls --depth=0` of the peer, one package per entry.
func npmVersions(ctx context.Context, peers peerSet, p peer) []string {
	cmd := exec.CommandContext(ctx, "npm", "ls", "--depth=0")
	cmd.Dir = filepath.Join(peers.dir, p.dir)
	out, _ := cmd.Output()
	var pkgs []string
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			pkgs = append(pkgs, f[len(f)-1])
		}
	}
	return pkgs
}

// command returns the first line of a command's output, or "unknown".
func command(ctx context.Context, name string, args ...string) string {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}
