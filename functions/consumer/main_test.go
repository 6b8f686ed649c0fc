package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
)

// runMainEnv makes the test binary run main instead of the tests, so the init failure is
// observed as Lambda observes it: output and exit status of the process.
const runMainEnv = "CONSUMER_TEST_RUN_MAIN"

func TestMain(m *testing.M) { testsupport.MainOrTests(m, runMainEnv, main) }

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
			got := testsupport.InitFailure(t, runMainEnv, tc.env)
			var line struct{ Level, Msg, Error string }
			if err := json.Unmarshal([]byte(got), &line); err != nil || line.Level != "ERROR" || line.Msg != "init failed" || !strings.Contains(line.Error, tc.want) {
				t.Errorf("line %s, want an ERROR naming %s", got, tc.want)
			}
		})
	}
}
