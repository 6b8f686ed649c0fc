package devapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/devapi"
	"github.com/idemlambda/idem/internal/devapi/devapitest"
	"github.com/idemlambda/idem/internal/samples"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/webhook"
)

func start(t *testing.T, env map[string]string) (*devapi.API, string) {
	t.Helper()
	return startWith(t, devapi.Config{Getenv: func(k string) string { return env[k] }})
}

func startWith(t *testing.T, cfg devapi.Config) (*devapi.API, string) {
	t.Helper()
	cfg.Template = "../../template.yaml"
	return devapitest.Start(t, cfg)
}

func TestFunctionsShareTheRedisOfRedisURLAndTakeTheProcessSettings(t *testing.T) {
	rdb := testsupport.SharedRedis(t)
	prefix := strings.TrimSuffix(testsupport.UniquePrefix(t), ":")
	api, base := start(t, map[string]string{
		"REDIS_URL":       "redis://" + testsupport.SharedRedisAddr(),
		"IDEM_KEY_PREFIX": prefix,
		// The secret defines the function: a process variable does not replace it.
		"WEBHOOK_SECRET":   "from-the-shell",
		"WEBHOOK_PROVIDER": "github",
		// Lambda's marker never leaks in: this is not a Lambda runtime.
		"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
	})
	if api.Embedded || api.Redis.Addr() != testsupport.SharedRedisAddr() {
		t.Fatalf("REDIS_URL set, yet Redis at %s", api.Redis.Addr())
	}
	if env := api.LocalEnv("WebhookStripeFunction"); env["WEBHOOK_PROVIDER"] != "stripe" || env["WEBHOOK_SECRET"] != webhook.DevSecret("stripe") {
		t.Fatalf("stripe function's environment %v", env)
	}

	if status := deliver(t, base, "stripe", webhook.DevSecret("stripe"), "evt_devapi_1"); status != 200 {
		t.Fatalf("delivery signed with the development secret: %d", status)
	}
	// The delivery's record, and the consumer's once the in-process queue handed it the event.
	var keys []string
	for deadline := time.Now().Add(10 * time.Second); len(keys) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if keys, err = rdb.Keys(context.Background(), prefix+":*").Result(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(keys)
	if len(keys) != 2 || !strings.HasPrefix(keys[0], prefix+":{consumer:") || !strings.HasPrefix(keys[1], prefix+":{stripe:") {
		t.Errorf("keys under IDEM_KEY_PREFIX %s: %q, want the record of the delivery and the consumer's", prefix, keys)
	}
}

func TestWithoutRedisURLTheFunctionsShareOneEmbeddedRedis(t *testing.T) {
	api, _ := start(t, nil)
	if !api.Embedded {
		t.Fatalf("no REDIS_URL, yet Redis at %s", api.Redis.Addr())
	}
	payments := api.LocalEnv("PaymentsFunction")
	if payments["PAYMENTS_LEDGER"] != "memory" {
		t.Fatalf("payments function's environment %v", payments)
	}
	if _, ok := payments["PAYMENTS_TABLE"]; ok {
		t.Errorf("PAYMENTS_TABLE set locally: %v", payments)
	}
	for _, f := range api.Template.Functions {
		env := api.LocalEnv(f.LogicalID)
		if env["AWS_LAMBDA_FUNCTION_NAME"] != f.LogicalID {
			t.Errorf("%s: AWS_LAMBDA_FUNCTION_NAME %q", f.LogicalID, env["AWS_LAMBDA_FUNCTION_NAME"])
		}
		// The template has a consumer: the sink is the in-process queue that feeds it.
		if f.Code == samtemplate.Webhook && env["WEBHOOK_SINK"] != "sqs" {
			t.Errorf("%s: sink %q", f.LogicalID, env["WEBHOOK_SINK"])
		}
	}
}

// startError returns the error of an API that must not start with env.
func startError(t *testing.T, env map[string]string) error {
	t.Helper()
	api, err := devapi.New(context.Background(), devapi.Config{
		Template:  "../../template.yaml",
		Getenv:    func(k string) string { return env[k] },
		LogOutput: io.Discard,
		AccessLog: io.Discard,
	})
	if err == nil {
		api.Close()
		t.Fatalf("New started with %v", env)
	}
	return err
}

func TestABadProcessSettingFailsStartWithTheVariable(t *testing.T) {
	err := startError(t, map[string]string{"IDEM_RESULT_TTL": "soon"})
	if err == nil || !strings.Contains(err.Error(), "IDEM_RESULT_TTL") {
		t.Fatalf("New: %v, want an error naming IDEM_RESULT_TTL", err)
	}
}

// deliver posts a sample delivery of provider signed with secret and returns the status.
func deliver(t *testing.T, base, provider, secret, id string) int {
	t.Helper()
	body, headers, err := samples.Delivery(provider, secret, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/"+provider, bytes.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// On the fresh embedded Redis of a local run, the first delivery of the first request already
// costs the budget's 2 round trips: the scripts go out as source, without the shebang line the
// embedded server cannot compile.
func TestFirstDeliveryOnAFreshEmbeddedRedisCostsTwoRoundTrips(t *testing.T) {
	var logs testsupport.Buffer
	_, base := startWith(t, devapi.Config{Getenv: func(string) string { return "" }, LogOutput: &logs})
	if status := deliver(t, base, "stripe", webhook.DevSecret("stripe"), "evt_fresh_1"); status != 200 {
		t.Fatalf("first delivery: %d", status)
	}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"outcome":"executed"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line == nil || line["redis_round_trips"] != float64(2) {
		t.Fatalf("first delivery's log line %v; want redis_round_trips 2\n%s", line, logs.String())
	}
}

func TestWebhookProvidersParameterChoosesTheWebhookRoutes(t *testing.T) {
	api, base := startWith(t, devapi.Config{
		Getenv:    func(string) string { return "" },
		Providers: "Slack,Github",
	})
	if got := api.Providers(); !slices.Equal(got, []string{"github", "slack"}) {
		t.Fatalf("providers %v, want github and slack", got)
	}
	if _, ok := api.Template.Function("WebhookGithubFunction"); !ok {
		t.Error("no WebhookGithubFunction")
	}
	if got := deliver(t, base, "github", webhook.DevSecret("github"), "delivery-chosen-1"); got != 200 {
		t.Errorf("github delivery: %d, want 200", got)
	}
	if got := deliver(t, base, "stripe", webhook.DevSecret("stripe"), "evt_not_chosen"); got != 404 {
		t.Errorf("stripe, not chosen: %d, want 404", got)
	}
	// By default, the template's default providers.
	def, _ := start(t, nil)
	if got := def.Providers(); !slices.Equal(got, []string{"github", "shopify", "slack", "standard", "stripe"}) {
		t.Errorf("default providers %v", got)
	}
}

// WEBHOOK_SINK in the process environment replaces the in-process queue: the webhook functions
// then send where it says, and the consumer is fed nothing.
func TestAProcessSinkReplacesTheInProcessQueue(t *testing.T) {
	api, _ := start(t, map[string]string{"WEBHOOK_SINK": "log"})
	for _, f := range api.Template.Functions {
		if f.Code == samtemplate.Webhook && api.LocalEnv(f.LogicalID)["WEBHOOK_SINK"] != "log" {
			t.Errorf("%s: sink %q, want the log sink of the local defaults", f.LogicalID, api.LocalEnv(f.LogicalID)["WEBHOOK_SINK"])
		}
	}
}
