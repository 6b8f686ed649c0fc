package rietest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/samtemplate"
)

// The Runtime Interface Emulator the tests run, from the Go module proxy.
const (
	RIEModule  = "github.com/aws/aws-lambda-runtime-interface-emulator"
	RIEVersion = "v0.0.0-20261030222936-bef5c4ba774d"
	riePackage = RIEModule + "/cmd/aws-lambda-rie"
)

// root is the module's root, relative to this package.
const root = "../.."

// invokePath is the emulator's (and Lambda's) synchronous invoke endpoint.
const invokePath = "/2015-03-31/functions/function/invocations"

// workDir holds the bootstraps the tests build; TestMain removes it.
var workDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rietest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rietest:", err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goCommand returns a go command run in the module root with env on top of the test's
// environment (minus the target settings a caller may have exported).
func goCommand(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// buildBootstrap builds the Lambda bootstrap of ./functions/<code> for goarch into dir, the
// way the Makefile's build-lambda does, and returns its path.
func buildBootstrap(ctx context.Context, code samtemplate.Code, goarch, dir string) (string, error) {
	out := filepath.Join(dir, string(code), goarch, "bootstrap")
	cmd := goCommand(ctx, []string{"GOOS=linux", "GOARCH=" + goarch, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false"},
		"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, "./functions/"+string(code))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./functions/%s for linux/%s: %w\n%s", code, goarch, err, b)
	}
	return out, nil
}

var (
	hostBuild     sync.Once
	hostBootstrap map[samtemplate.Code]string
	hostBuildErr  error
)

// bootstraps builds every function for the host once, and returns their paths.
func bootstraps(t *testing.T) map[samtemplate.Code]string {
	t.Helper()
	hostBuild.Do(func() {
		hostBootstrap = map[samtemplate.Code]string{}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for _, code := range []samtemplate.Code{samtemplate.Webhook, samtemplate.Payments, samtemplate.Consumer} {
			path, err := buildBootstrap(ctx, code, runtime.GOARCH, workDir)
			if err != nil {
				hostBuildErr = err
				return
			}
			hostBootstrap[code] = path
		}
	})
	if hostBuildErr != nil {
		t.Fatal(hostBuildErr)
	}
	return hostBootstrap
}
