//go:build linux

package rietest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/testsupport"
)

var (
	rieOnce sync.Once
	riePath string
	rieErr  error
)

// rieBinary returns the emulator, building it into the user cache directory the first time.
// A failure skips the test, or fails it under CI.
func rieBinary(t *testing.T) string {
	t.Helper()
	rieOnce.Do(func() { riePath, rieErr = installRIE() })
	if rieErr != nil {
		testsupport.Unavailable(t, "cannot build the Runtime Interface Emulator %s@%s: %v", riePackage, RIEVersion, rieErr)
	}
	return riePath
}

// installRIE builds the emulator with go install into <user cache>/idem/aws-lambda-rie/<version>,
// unless it is there already. The binary is moved into place in one rename, so concurrent
// test processes never run a half-written file.
func installRIE() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "idem", "aws-lambda-rie", RIEVersion, runtime.GOARCH)
	bin := filepath.Join(dir, "aws-lambda-rie")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	gobin, err := os.MkdirTemp(dir, "install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(gobin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	built := filepath.Join(gobin, "aws-lambda-rie")
	// go install pkg@version builds outside this module, from the module proxy.
	install := goCommand(ctx, []string{"GOBIN=" + gobin, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false"},
		"install", riePackage+"@"+RIEVersion)
	install.Dir = gobin
	if out, err := install.CombinedOutput(); err != nil {
		// go install asks the proxy about the module even when it is cached; without a proxy,
		// build it in its own module directory from the module cache instead.
		if buildErr := buildRIEFromModuleCache(ctx, built); buildErr != nil {
			return "", fmt.Errorf("go install: %w\n%s\nfrom the module cache: %w", err, out, buildErr)
		}
	}
	if err := os.Rename(built, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// buildRIEFromModuleCache builds the emulator to out from its module directory, downloaded
// into (or found in) the module cache.
func buildRIEFromModuleCache(ctx context.Context, out string) error {
	download := goCommand(ctx, []string{"GOFLAGS=-buildvcs=false"}, "mod", "download", "-json", RIEModule+"@"+RIEVersion)
	download.Dir = filepath.Dir(out)
	js, err := download.Output()
	if err != nil {
		return fmt.Errorf("go mod download: %w\n%s", err, js)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(js, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("go mod download: no module directory (%s): %v", mod.Error, err)
	}
	build := goCommand(ctx, []string{"CGO_ENABLED=0", "GOFLAGS=-buildvcs=false"}, "build", "-o", out, "./cmd/aws-lambda-rie")
	build.Dir = mod.Dir
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, b)
	}
	return nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects a process's output.
type syncBuffer = testsupport.Buffer

// emulator is one function running under the Runtime Interface Emulator.
type emulator struct {
	name   string
	url    string
	output *syncBuffer
}

// startEmulator runs bootstrap under the emulator with env (and the Lambda variables the
// function's template settings imply) and stops it, with the function, at cleanup. A port picked
// free can be taken by another test's server before the emulator binds it, so the emulator must
// answer HTTP while still running; otherwise it is started again on new ports, up to 3 times.
func startEmulator(t *testing.T, f samtemplate.Function, bootstrap string, env map[string]string) *emulator {
	t.Helper()
	var last string
	for range 3 {
		e, why := tryEmulator(t, f, bootstrap, env)
		if e != nil {
			return e
		}
		last = why
	}
	testsupport.Unavailable(t, "the Runtime Interface Emulator did not start: %s", last)
	return nil
}

// tryEmulator starts the emulator once on fresh ports. It returns the running emulator, or nil
// and why not.
func tryEmulator(t *testing.T, f samtemplate.Function, bootstrap string, env map[string]string) (*emulator, string) {
	t.Helper()
	rie := rieBinary(t)
	port, apiPort := freePort(t), freePort(t)
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", "127.0.0.1:"+strconv.Itoa(port),
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(apiPort),
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the function runs in the same group
	// Only what a Lambda environment has: no variable of the developer's shell leaks in.
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"TZ=UTC",
		"AWS_REGION=us-east-1",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_LAMBDA_FUNCTION_NAME=" + f.LogicalID,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(f.Timeout/time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(f.MemorySize),
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	e := &emulator{name: f.LogicalID, url: base + invokePath, output: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = e.output, e.output
	if err := cmd.Start(); err != nil {
		testsupport.Unavailable(t, "start the Runtime Interface Emulator: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	// Any HTTP answer to a path that invokes nothing shows an HTTP server on the port.
	probe := &http.Client{Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if resp, err := probe.Get(base + "/"); err == nil {
			resp.Body.Close()
			time.Sleep(50 * time.Millisecond)
			select {
			case <-exited:
				// Someone else's server answered: the emulator could not bind the port.
				return nil, fmt.Sprintf("port %d answered but the emulator exited:\n%s", port, e.output)
			default:
			}
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("%s under the emulator:\n%s", f.LogicalID, e.output)
				}
			})
			return e, ""
		}
		select {
		case <-exited:
			return nil, fmt.Sprintf("the emulator exited at start:\n%s", e.output)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Sprintf("the emulator did not answer on %d:\n%s", port, e.output)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// relayBound is how long a test waits for an effect that reaches it a moment after the answer
// it follows: a line the function wrote, copied from its pipe by the emulator; a server counter
// read on another connection. Generous, so that a busy machine delays a test instead of failing
// it; a test that finds what it waits for goes on at once.
const relayBound = 15 * time.Second

// eventually polls done every 20 ms until it holds or relayBound has passed, and reports whether
// it held.
func eventually(done func() bool) bool {
	for deadline := time.Now().Add(relayBound); ; time.Sleep(20 * time.Millisecond) {
		if done() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// waitOutput waits, for at most relayBound, until the function's output under the emulator
// satisfies done, and returns the output last read, whether it did or not.
func (e *emulator) waitOutput(done func(output string) bool) string {
	var out string
	eventually(func() bool { out = e.output.String(); return done(out) })
	return out
}

// errInvocation is an invocation the runtime answered with a function error (init failure,
// crash, timeout) instead of a response.
var errInvocation = errors.New("function error")

// invoke sends ev to the function and decodes its response.
func (e *emulator) invoke(t *testing.T, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	t.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Post(e.url, "application/json", bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("invoke %s: %v", e.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// A function error comes back as {"errorType": ..., "errorMessage": ...}, with a 200 or
	// a 5xx from the emulator depending on where it happened.
	var fnErr struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(body, &fnErr) == nil && fnErr.ErrorType != "" {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("%w: %s: %s", errInvocation, fnErr.ErrorType, fnErr.ErrorMessage)
	}
	var out events.APIGatewayV2HTTPResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.StatusCode == 0 {
		return out, fmt.Errorf("%w: emulator answered %d: %s", errInvocation, resp.StatusCode, body)
	}
	return out, nil
}
