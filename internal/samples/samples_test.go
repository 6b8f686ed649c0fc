package samples_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	paymentshandler "github.com/idemlambda/idem/internal/functions/payments/handler"
	webhookhandler "github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/samples"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/webhook"
)

const (
	templatePath = "../../template.yaml"
	eventsDir    = "../../events"
)

// The WebhookProviders the tests load template.yaml with: its default list, and every provider
// it can deploy, which is every preset.
const (
	defaultProviders = ""
	everyPreset      = samtemplate.AllProviders
)

func load(t *testing.T) (*samtemplate.Template, []samples.Sample) {
	t.Helper()
	return loadTemplate(t, defaultProviders)
}

// loadTemplate loads template.yaml for the WebhookProviders given (defaultProviders or
// everyPreset), with its samples.
func loadTemplate(t *testing.T, providers string) (*samtemplate.Template, []samples.Sample) {
	t.Helper()
	tpl, err := samtemplate.LoadProviders(templatePath, providers)
	if err != nil {
		t.Fatal(err)
	}
	all, err := samples.All(tpl)
	if err != nil {
		t.Fatal(err)
	}
	return tpl, all
}

func TestCheckedInEventsAreWhatTheGeneratorWrites(t *testing.T) {
	tpl, all := load(t)
	for _, s := range all {
		path := filepath.Join(eventsDir, s.File)
		onDisk, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run make events)", err)
		}
		ev, err := samples.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		// Rebuilt at the time the file records, the generator must write the same bytes.
		again, err := s.Event(time.UnixMilli(ev.RequestContext.TimeEpoch))
		if err != nil {
			t.Fatal(err)
		}
		want, err := samples.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, want) {
			t.Errorf("%s differs from what cmd/events writes for its time; run make events", path)
		}
		if ev.RouteKey != s.Route.Key() || ev.Version != "2.0" {
			t.Errorf("%s: routeKey %q version %q", s.File, ev.RouteKey, ev.Version)
		}
	}
	env, err := os.ReadFile(filepath.Join(eventsDir, samples.EnvFile))
	if err != nil {
		t.Fatal(err)
	}
	want, err := samples.EnvJSON(tpl, samples.DockerHostRedisURL)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(env, want) {
		t.Errorf("events/%s differs from what cmd/events writes; run make events", samples.EnvFile)
	}
}

func TestEnvFileSetsEveryFunctionOfTheTemplate(t *testing.T) {
	tpl, _ := load(t)
	var env map[string]map[string]string
	data, err := samples.EnvJSON(tpl, samples.DockerHostRedisURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	if len(env) != len(tpl.Functions) {
		t.Errorf("%d functions in env.json, %d in the template", len(env), len(tpl.Functions))
	}
	for _, f := range tpl.Functions {
		vars := env[f.LogicalID]
		if vars["REDIS_URL"] != "redis://host.docker.internal:6379" {
			t.Errorf("%s: REDIS_URL %q", f.LogicalID, vars["REDIS_URL"])
		}
		switch f.Code {
		case samtemplate.Webhook:
			p := f.Env["WEBHOOK_PROVIDER"]
			if vars["WEBHOOK_SECRET"] != samples.DevSecret(p) || vars["WEBHOOK_SINK"] != "log" || vars["WEBHOOK_SECRET_ARN"] != "" {
				t.Errorf("%s: %v", f.LogicalID, vars)
			}
		case samtemplate.Payments:
			if vars["PAYMENTS_LEDGER"] != "memory" {
				t.Errorf("%s: %v", f.LogicalID, vars)
			}
		}
	}
}

// lambdaFunction is a function's handler as its main hands it to Lambda.
type lambdaFunction interface {
	Handle(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	Close() error
}

// functions builds, in-process, each function of the template with the variables the samples
// are meant for (LambdaEnv, on the shared test Redis under a prefix of its own).
func functions(t *testing.T, tpl *samtemplate.Template) map[string]func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	t.Helper()
	testsupport.SharedRedis(t)
	prefix := strings.TrimSuffix(testsupport.UniquePrefix(t), ":")
	out := map[string]func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error){}
	for _, f := range tpl.Functions {
		env := samples.LambdaEnv(f, "redis://"+testsupport.SharedRedisAddr())
		env["IDEM_KEY_PREFIX"] = prefix
		getenv := func(k string) string { return env[k] }
		var h lambdaFunction
		var err error
		switch f.Code {
		case samtemplate.Webhook:
			h, err = webhookhandler.New(context.Background(), getenv, webhookhandler.WithLogOutput(io.Discard))
		case samtemplate.Payments:
			h, err = paymentshandler.New(context.Background(), getenv, paymentshandler.WithLogOutput(io.Discard))
		default:
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", f.LogicalID, err)
		}
		t.Cleanup(func() { _ = h.Close() })
		out[f.LogicalID] = h.Handle
	}
	return out
}

func TestSamplesGetTheAnswersTheyDocument(t *testing.T) {
	for _, providers := range []string{defaultProviders, everyPreset} {
		t.Run("WebhookProviders="+providers, func(t *testing.T) { testSamplesGetTheAnswersTheyDocument(t, providers) })
	}
}

// TestEveryPresetHasASample: a template routing every preset gets a signed sample of each.
func TestEveryPresetHasASample(t *testing.T) {
	_, all := loadTemplate(t, everyPreset)
	have := map[string]bool{}
	for _, s := range all {
		have[s.Provider] = true
	}
	for _, p := range webhook.Names() {
		if !have[p] {
			t.Errorf("no sample for %s", p)
		}
	}
}

func testSamplesGetTheAnswersTheyDocument(t *testing.T, providers string) {
	tpl, all := loadTemplate(t, providers)
	fns := functions(t, tpl)
	ctx := context.Background()
	now := time.Now()
	byFile := map[string]samples.Sample{}
	for _, s := range all {
		byFile[s.File] = s
	}
	done := map[string]events.APIGatewayV2HTTPResponse{}
	var invoke func(s samples.Sample)
	invoke = func(s samples.Sample) {
		if _, ok := done[s.File]; ok {
			return
		}
		if s.After != "" {
			invoke(byFile[s.After])
		}
		ev, err := s.Event(now)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := fns[s.Route.Function](ctx, ev)
		if err != nil {
			t.Fatalf("%s: %v", s.File, err)
		}
		done[s.File] = resp
		if resp.StatusCode != s.Status {
			t.Errorf("%s: %d %s, want %d", s.File, resp.StatusCode, resp.Body, s.Status)
		}
		if s.Replays {
			again, err := fns[s.Route.Function](ctx, ev)
			if err != nil {
				t.Fatal(err)
			}
			if again.StatusCode != s.Status || again.Headers["idempotent-replayed"] != "true" || again.Body != resp.Body {
				t.Errorf("%s again: %d %v %s, want the first answer replayed", s.File, again.StatusCode, again.Headers, again.Body)
			}
		}
	}
	for _, s := range all {
		invoke(s)
	}
	if got := done["webhook-slack-url-verification.json"].Body; !strings.Contains(got, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P") {
		t.Errorf("url_verification answered %s, want the challenge", got)
	}
	if ev, _ := byFile["webhook-shopify-base64.json"].Event(now); !ev.IsBase64Encoded {
		t.Error("webhook-shopify-base64.json is not base64-encoded")
	}
}

func TestResignMakesAStaleFileAcceptableAgain(t *testing.T) {
	for _, providers := range []string{defaultProviders, everyPreset} {
		t.Run("WebhookProviders="+providers, func(t *testing.T) { testResignMakesAStaleFileAcceptableAgain(t, providers) })
	}
}

func testResignMakesAStaleFileAcceptableAgain(t *testing.T, providers string) {
	tpl, all := loadTemplate(t, providers)
	fns := functions(t, tpl)
	ctx := context.Background()
	for _, s := range all {
		if !s.Timestamped {
			continue
		}
		ev, err := s.Event(time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		stale, err := fns[s.Route.Function](ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if stale.StatusCode != 401 {
			t.Errorf("%s signed an hour ago: %d, want 401", s.File, stale.StatusCode)
		}
		if err := s.Resign(&ev, time.Now()); errors.Is(err, samples.ErrTimestampInBody) {
			continue // stale for good: the time is signed inside the body
		} else if err != nil {
			t.Fatal(err)
		}
		fresh, err := fns[s.Route.Function](ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if fresh.StatusCode != s.Status {
			t.Errorf("%s re-signed: %d %s, want %d", s.File, fresh.StatusCode, fresh.Body, s.Status)
		}
	}
}

func TestDeliveryIsSignedWithTheGivenSecret(t *testing.T) {
	body, headers, err := samples.Delivery("github", "s3cret", "d-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if headers["x-github-delivery"] != "d-1" || !strings.HasPrefix(headers["x-hub-signature-256"], "sha256=") || len(body) == 0 {
		t.Fatalf("headers %v", headers)
	}
	if _, _, err := samples.Delivery("standard", "not-whsec", "m-1", time.Now()); err == nil {
		t.Error("a Standard Webhooks delivery was signed with a secret that is not whsec_<base64>")
	}
	if _, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(samples.DevSecret("standard"), "whsec_")); err != nil {
		t.Errorf("standard development secret: %v", err)
	}
}
