//go:build linux

package rietest

import (
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/samples"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/testsupport"
)

// setup loads the template and the samples, checks the shared Redis and builds the bootstraps.
func setup(t *testing.T) (*samtemplate.Template, []samples.Sample, map[samtemplate.Code]string) {
	t.Helper()
	tpl, err := samtemplate.Load(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := samples.All(tpl)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.SharedRedis(t)
	rieBinary(t)
	return tpl, all, bootstraps(t)
}

// lambdaEnv is what env.json sets for f, pointed at the shared test Redis under prefix, plus
// the AWS_SAM_LOCAL=true that sam local adds, without which the development secrets env.json
// holds are refused inside Lambda.
func lambdaEnv(f samtemplate.Function, prefix string) map[string]string {
	env := samples.LambdaEnv(f, "redis://"+testsupport.SharedRedisAddr())
	env["AWS_SAM_LOCAL"] = "true"
	env["IDEM_KEY_PREFIX"] = prefix
	env["LOG_LEVEL"] = "info"
	return env
}

// readEvent reads a sample's file from events/ and signs it again now, as `make events` would.
func readEvent(t *testing.T, s samples.Sample) events.APIGatewayV2HTTPRequest {
	t.Helper()
	ev, err := samples.Read(filepath.Join(root, "events", s.File))
	if err != nil {
		t.Fatalf("%v (run make events)", err)
	}
	if err := s.Resign(&ev, time.Now()); err != nil {
		t.Fatal(err)
	}
	return ev
}

// Every file of events/ under the emulator gets the answer its sample documents.
//
//cyclo:one case per kind of sample file, each checked where it is answered, so a failure names the file
func TestEventFilesUnderTheRuntimeInterfaceEmulator(t *testing.T) {
	tpl, all, bins := setup(t)
	prefix := strings.TrimSuffix(testsupport.UniquePrefix(t), ":")

	for _, f := range tpl.Functions {
		if f.Code == samtemplate.Consumer {
			continue // no route, no sample: TestConsumerUnderTheEmulatorExecutesEachEventOnce
		}
		var mine []samples.Sample
		for _, s := range all {
			if s.Route.Function == f.LogicalID {
				mine = append(mine, s)
			}
		}
		if len(mine) == 0 {
			t.Errorf("events/ has no sample for %s", f.LogicalID)
			continue
		}
		t.Run(f.LogicalID, func(t *testing.T) {
			t.Parallel()
			e := startEmulator(t, f, bins[f.Code], lambdaEnv(f, prefix))
			answers := map[string]events.APIGatewayV2HTTPResponse{}
			var run func(s samples.Sample)
			run = func(s samples.Sample) {
				if _, ok := answers[s.File]; ok {
					return
				}
				if s.After != "" {
					for _, dep := range mine {
						if dep.File == s.After {
							run(dep)
						}
					}
				}
				ev := readEvent(t, s)
				first, err := e.invoke(t, ev)
				if err != nil {
					t.Fatalf("%s: %v", s.File, err)
				}
				answers[s.File] = first
				if first.StatusCode != s.Status {
					t.Errorf("%s: %d %s, want %d (%s)", s.File, first.StatusCode, first.Body, s.Status, s.Description)
				}
				if first.Headers["content-type"] != "application/json" {
					t.Errorf("%s: content-type %q", s.File, first.Headers["content-type"])
				}
				if !s.Replays {
					return
				}
				second, err := e.invoke(t, ev)
				if err != nil {
					t.Fatalf("%s again: %v", s.File, err)
				}
				if second.StatusCode != first.StatusCode || second.Headers["idempotent-replayed"] != "true" || second.Body != first.Body {
					t.Errorf("%s again: %d %v %s, want the first answer replayed", s.File, second.StatusCode, second.Headers, second.Body)
				}
			}
			for _, s := range mine {
				run(s)
			}

			if f.Code == samtemplate.Payments {
				checkPaymentReadBack(t, e, mine, answers["payments-create.json"])
			}
			if a, ok := answers["webhook-slack-url-verification.json"]; ok {
				var body struct{ Challenge string }
				if json.Unmarshal([]byte(a.Body), &body) != nil || body.Challenge == "" {
					t.Errorf("url_verification answered %s, want the challenge", a.Body)
				}
			}
			if a, ok := answers["webhook-stripe-bad-signature.json"]; ok && !strings.Contains(a.Body, `"invalid_signature"`) {
				t.Errorf("bad signature answered %s, want code invalid_signature", a.Body)
			}
			if t.Failed() {
				return
			}
			// The function logged one line per request inside the runtime; the emulator copies it
			// from the function's pipe a moment after the answer.
			executed := func(out string) bool { return strings.Contains(out, `"outcome":"executed"`) }
			if out := e.waitOutput(executed); !executed(out) {
				t.Errorf("no request log line in the function's output:\n%s", out)
			}
		})
	}
}

// checkPaymentReadBack reads the payment payments-create.json made back with payments-get.json,
// its id put in the path as the gateway would.
func checkPaymentReadBack(t *testing.T, e *emulator, mine []samples.Sample, created events.APIGatewayV2HTTPResponse) {
	t.Helper()
	var p struct{ ID string }
	if err := json.Unmarshal([]byte(created.Body), &p); err != nil || p.ID == "" {
		t.Fatalf("payments-create.json answered %s", created.Body)
	}
	for _, s := range mine {
		if s.File != "payments-get.json" {
			continue
		}
		ev := readEvent(t, s)
		ev.RawPath = "/payments/" + url.PathEscape(p.ID)
		ev.RequestContext.HTTP.Path = "/payments/" + p.ID
		ev.PathParameters = map[string]string{"id": p.ID}
		got, err := e.invoke(t, ev)
		if err != nil {
			t.Fatal(err)
		}
		if got.StatusCode != 200 || got.Body != created.Body {
			t.Errorf("GET /payments/%s: %d %s, want 200 %s", p.ID, got.StatusCode, got.Body, created.Body)
		}
		return
	}
	t.Error("no payments-get.json sample")
}

func TestWebhookFunctionWithoutSecretFailsInitInsideLambda(t *testing.T) {
	tpl, all, bins := setup(t)
	prefix := strings.TrimSuffix(testsupport.UniquePrefix(t), ":")
	f, ok := tpl.Function("WebhookStripeFunction")
	if !ok {
		t.Fatal("no WebhookStripeFunction in the template")
	}
	env := maps.Clone(lambdaEnv(f, prefix))
	delete(env, "WEBHOOK_SECRET") // no development secret inside Lambda: init must refuse to start
	e := startEmulator(t, f, bins[f.Code], env)
	for _, s := range all {
		if s.File != "webhook-stripe.json" {
			continue
		}
		resp, err := e.invoke(t, readEvent(t, s))
		if !errors.Is(err, errInvocation) {
			t.Fatalf("invocation without a secret: %d %s, %v; want an init failure", resp.StatusCode, resp.Body, err)
		}
		// The emulator may answer before the function's last line has been copied from its pipe.
		named := func(out string) bool { return strings.Contains(out, "WEBHOOK_SECRET") }
		if out := e.waitOutput(named); !named(out) {
			t.Errorf("the init failure does not name WEBHOOK_SECRET:\n%s", out)
		}
		return
	}
	t.Fatal("no webhook-stripe.json sample")
}
