package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runMainEnv makes the test binary run main instead of the tests, so the init failure is
// observed as Lambda observes it: output and exit status of the process.
const runMainEnv = "CONSUMER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestBadSettingsFailInitWithOneLineNamingTheVariable(t *testing.T) {
	lambda := []string{"AWS_LAMBDA_RUNTIME_API=127.0.0.1:9001", "AWS_LAMBDA_FUNCTION_NAME=idem-ConsumerFunction-Abc"}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no Redis inside Lambda", lambda, "REDIS_URL"},
		{"bad concurrency", append([]string{"REDIS_URL=redis://127.0.0.1:1", "CONSUMER_CONCURRENCY=lots"}, lambda...), "CONSUMER_CONCURRENCY"},
		{"bad result TTL", append([]string{"REDIS_URL=redis://127.0.0.1:1", "IDEM_RESULT_TTL=forever"}, lambda...), "IDEM_RESULT_TTL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append([]string{runMainEnv + "=1"}, tc.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; stdout %s stderr %s", err, stdout.String(), stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if len(lines) != 1 || stderr.Len() != 0 {
				t.Fatalf("want one line on stdout and nothing on stderr; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
			var line struct{ Level, Msg, Error string }
			if err := json.Unmarshal([]byte(lines[0]), &line); err != nil || line.Level != "ERROR" || line.Msg != "init failed" || !strings.Contains(line.Error, tc.want) {
				t.Errorf("line %s, want an ERROR naming %s", lines[0], tc.want)
			}
		})
	}
}
