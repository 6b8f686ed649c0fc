package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
)

// runMainEnv makes the test binary run main instead of the tests, so the init failure is
// observed as Lambda observes it: output and exit status of the process.
const runMainEnv = "WEBHOOK_TEST_RUN_MAIN"

func TestMain(m *testing.M) { testsupport.MainOrTests(m, runMainEnv, main) }

func TestBadSettingsFailInitWithOneLineNamingTheVariable(t *testing.T) {
	const secret = "s3cr3t-never-logged"
	lambda := []string{"AWS_LAMBDA_RUNTIME_API=127.0.0.1:9001", "AWS_LAMBDA_FUNCTION_NAME=idem-WebhookStripeFunction-Abc"}
	cases := []struct {
		name string
		env  []string
		want string
	}{
		{"no provider", lambda, "WEBHOOK_PROVIDER"},
		{"no secret inside Lambda", append([]string{"WEBHOOK_PROVIDER=stripe"}, lambda...), "WEBHOOK_SECRET"},
		{"development secret inside Lambda", append([]string{"WEBHOOK_PROVIDER=github", "WEBHOOK_SECRET=dev-github-secret", "REDIS_URL=redis://127.0.0.1:1"}, lambda...), "WEBHOOK_SECRET"},
		{"no Redis inside Lambda", append([]string{"WEBHOOK_PROVIDER=stripe", "WEBHOOK_SECRET=" + secret}, lambda...), "REDIS_URL"},
		{"bad tolerance", []string{"WEBHOOK_PROVIDER=slack", "WEBHOOK_SECRET=" + secret, "WEBHOOK_TOLERANCE=soon"}, "WEBHOOK_TOLERANCE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := testsupport.InitFailure(t, runMainEnv, tc.env)
			var line struct{ Level, Msg, Error string }
			if err := json.Unmarshal([]byte(got), &line); err != nil {
				t.Fatalf("line is not JSON: %v: %s", err, got)
			}
			if line.Level != "ERROR" || line.Msg != "init failed" || !strings.Contains(line.Error, tc.want) {
				t.Errorf("line %s, want an ERROR naming %s", got, tc.want)
			}
			if strings.Contains(got, secret) {
				t.Errorf("the secret is in the line: %s", got)
			}
		})
	}
}
