package testsupport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// DynaliteVersion is the version of the npm package dynalite that [StartDynalite] installs and
// runs. Changing it installs the new version next to the old one on the next run.
const DynaliteVersion = "4.0.0"

// StartDynalite starts dynalite, an in-memory DynamoDB-compatible server, on a free port of
// 127.0.0.1 and returns its endpoint, "http://127.0.0.1:<port>", for an aws-sdk-go-v2 client's
// BaseEndpoint (any region and static credentials are accepted). Tables become ACTIVE at once.
// The server is killed at cleanup.
//
// dynalite is installed on first use with npm, pinned to [DynaliteVersion], into
// .tools/node/dynalite@<version> under the module root (the nearest directory above the working
// directory holding go.mod; .tools/ is git-ignored), or under the user cache directory when there
// is no module root. Installation runs under a file lock and into a temporary directory renamed
// into place, so test binaries of several packages running at once install it once. If node or
// npm is missing, or installation or start fails, the test is skipped, or failed under CI (see
// [Unavailable]).
//
// dynalite implements the item, query and table operations but not transactions
// (TransactWriteItems answers UnknownOperationException).
func StartDynalite(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Unavailable(t, "node not found in PATH (dynalite needs Node.js >= 20): %v", err)
	}
	cli, err := installDynalite()
	if err != nil {
		Unavailable(t, "install dynalite@%s: %v", DynaliteVersion, err)
	}
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			Unavailable(t, "dynalite: %v", err)
		}
		p, err := startProcess(node, cli, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
		if err != nil {
			Unavailable(t, "dynalite: %v", err)
		}
		endpoint := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = waitHTTP(endpoint, p, 20*time.Second); lastErr == nil {
			t.Cleanup(func() {
				if err := p.kill(); err != nil {
					t.Logf("testsupport: dynalite: %v", err)
				}
			})
			return endpoint
		}
		_ = p.kill()
		lastErr = fmt.Errorf("%w; output:\n%s", lastErr, p.output())
	}
	Unavailable(t, "dynalite did not start: %v", lastErr)
	return ""
}

// installDynalite returns the path of dynalite's cli.js, installing the pinned version first if
// it is not installed yet.
func installDynalite() (string, error) {
	base, err := toolsDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "dynalite@"+DynaliteVersion)
	cli := filepath.Join(dir, "node_modules", "dynalite", "cli.js")
	if fileExists(cli) {
		return cli, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm not found in PATH: %w", err)
	}
	if err := mkdir(base); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(base, ".install.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(cli) { // installed by another process while we waited for the lock
		return cli, nil
	}

	tmp, err := os.MkdirTemp(base, ".dynalite-install-")
	if err != nil {
		return "", fmt.Errorf("create install dir: %w", err)
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left to remove
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Scripts are skipped: they only build classic-level, the on-disk store that the in-memory
	// server never loads.
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--ignore-scripts",
		"--loglevel=error", "--prefix", tmp, "dynalite@"+DynaliteVersion)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install: %w; output:\n%s", err, out)
	}
	if !fileExists(filepath.Join(tmp, "node_modules", "dynalite", "cli.js")) {
		return "", errors.New("npm install succeeded but node_modules/dynalite/cli.js is missing")
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it private to us
		return "", fmt.Errorf("install dir permissions: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if fileExists(cli) { // a process without the lock (another platform) won the race
			return cli, nil
		}
		return "", fmt.Errorf("move dynalite into place: %w", err)
	}
	return cli, nil
}

// toolsDir returns the directory that holds Node.js tools: .tools/node under the module root, or
// under the user cache directory when no go.mod is found above the working directory.
func toolsDir() (string, error) {
	if root, ok := moduleRoot(); ok {
		return filepath.Join(root, ".tools", "node"), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no go.mod above the working directory and no user cache dir: %w", err)
	}
	return filepath.Join(cache, "idem-testsupport", "node"), nil
}

// moduleRoot returns the nearest directory at or above the working directory that holds go.mod.
func moduleRoot() (string, bool) {
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if fileExists(filepath.Join(dir, "go.mod")) {
			return dir, true
		}
		if filepath.Dir(dir) == dir {
			return "", false
		}
	}
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// waitHTTP waits until endpoint answers any HTTP request, or p exits, or timeout passes.
func waitHTTP(endpoint string, p *process, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if p.exited() {
			return p.exitError()
		}
		resp, err := client.Get(endpoint)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no answer from %s within %v: %w", endpoint, timeout, lastErr)
}
