package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
)

// runMainEnv makes the test binary run main instead of the tests, so the init failure is
// observed as Lambda observes it: output and exit status of the process.
const runMainEnv = "PAYMENTS_TEST_RUN_MAIN"

func TestMain(m *testing.M) { testsupport.MainOrTests(m, runMainEnv, main) }

func TestInitFailureIsOneLineNamingTheVariable(t *testing.T) {
	const lambda = "AWS_LAMBDA_RUNTIME_API=127.0.0.1:9001"
	for _, tt := range []struct {
		name string
		env  []string
		want string
	}{
		{"no table inside Lambda", []string{lambda, "REDIS_URL=redis://127.0.0.1:1", "PAYMENTS_AUTH=iam"}, "PAYMENTS_TABLE"},
		{"no Redis inside Lambda", []string{lambda, "PAYMENTS_LEDGER=memory", "PAYMENTS_AUTH=iam"}, "REDIS_URL"},
		{"no authorization mode inside Lambda", []string{lambda, "PAYMENTS_LEDGER=memory", "REDIS_URL=redis://127.0.0.1:1"}, "PAYMENTS_AUTH"},
		{"no Redis outside Lambda", nil, "REDIS_URL"},
		{"bad ledger", []string{"PAYMENTS_LEDGER=sqlite"}, "PAYMENTS_LEDGER"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := testsupport.InitFailure(t, runMainEnv, tt.env)
			var line map[string]any
			if err := json.Unmarshal([]byte(got), &line); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, got)
			}
			if line["level"] != "ERROR" || line["msg"] != "init failed" || line["variable"] != tt.want ||
				line["function"] != "payments" || !strings.Contains(line["error"].(string), tt.want) {
				t.Fatalf("line %v, want variable %s", line, tt.want)
			}
		})
	}
}
