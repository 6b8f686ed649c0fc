package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/devapi"
	"github.com/idemlambda/idem/internal/samples"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/webhook"
)

const templatePath = "../../template.yaml"

// syncBuffer collects the server's output from its goroutines.
type syncBuffer = testsupport.Buffer

// startServer runs the command's server on a free port, with the embedded Redis, and returns
// its base URL and the banner it printed.
func startServer(t *testing.T) (string, *syncBuffer, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	banner, logs := &syncBuffer{}, &syncBuffer{}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	cfg := devapi.Config{
		Template:  templatePath,
		Getenv:    func(string) string { return "" }, // no REDIS_URL: the embedded Redis
		LogOutput: logs,
		AccessLog: io.Discard,
	}
	go func() { done <- run(ctx, "127.0.0.1:0", cfg, banner, ready) }()
	select {
	case base := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
		return base, banner, logs
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("the server did not start")
	}
	return "", nil, nil
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, url string, headers map[string]string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return roundTrip(t, req)
}

func roundTrip(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, body := testsupport.RoundTrip(t, req)
	return answer{resp.StatusCode, resp.Header, body}
}

func TestServesEveryRouteOfTheTemplateAndNothingElse(t *testing.T) {
	base, banner, _ := startServer(t)
	tpl, err := samtemplate.Load(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range tpl.Routes() {
		path := strings.ReplaceAll(r.Path, "{id}", "pay_unknown")
		req, _ := http.NewRequest(r.Method, base+path, strings.NewReader(`{}`))
		a := roundTrip(t, req)
		// Every route reaches its function, whose errors are {"error": {...}}; the gateway's
		// own 404 is {"message": "Not Found"}.
		if bytes.Contains(a.body, []byte(`"message":"Not Found"`)) || !bytes.Contains(a.body, []byte(`"error"`)) {
			t.Errorf("%s did not reach %s: %d %s", r.Key(), r.Function, a.status, a.body)
		}
		if !strings.Contains(banner.String(), base+r.Path) {
			t.Errorf("the banner does not list %s", base+r.Path)
		}
	}
	for _, f := range tpl.Functions {
		if p := f.Env["WEBHOOK_PROVIDER"]; p != "" && !strings.Contains(banner.String(), webhook.DevSecret(p)) {
			t.Errorf("the banner does not print the development secret of %s", p)
		}
	}
	if !strings.Contains(banner.String(), "make send PROVIDER=all URL="+base) {
		t.Errorf("the banner has no ready-to-paste make send line:\n%s", banner)
	}

	for _, tc := range []struct{ method, path string }{{"GET", "/"}, {"POST", "/webhooks/unknown"}, {"DELETE", "/payments"}} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		a := roundTrip(t, req)
		if a.status != 404 || string(a.body) != `{"message":"Not Found"}` {
			t.Errorf("%s %s: %d %s, want the gateway's 404", tc.method, tc.path, a.status, a.body)
		}
	}
}

func TestSignedStripeDeliveryRunsOnceThenReplays(t *testing.T) {
	base, _, logs := startServer(t)
	body, headers, err := samples.Delivery("stripe", webhook.DevSecret("stripe"), "evt_localapi_test_1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	first := post(t, base+"/webhooks/stripe", headers, body)
	if first.status != 200 || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first delivery: %d replayed=%q %s", first.status, first.header.Get("Idempotent-Replayed"), first.body)
	}
	second := post(t, base+"/webhooks/stripe", headers, body)
	if second.status != 200 || second.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(second.body, first.body) {
		t.Fatalf("second delivery: %d replayed=%q %s, want the first answer replayed\n%s", second.status, second.header.Get("Idempotent-Replayed"), second.body, logs)
	}
	// The whole pipeline on one machine: the webhook function's executed line, then the
	// consumer's, which the in-process queue invokes once the webhook invocation returned.
	webhookLine := `"function":"WebhookStripeFunction","provider":"stripe","outcome":"executed"`
	consumerLine := `"function":"ConsumerFunction","provider":"stripe","outcome":"executed","id":"evt_localapi_test_1"`
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), consumerLine) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	out := logs.String()
	if strings.Count(out, webhookLine) != 1 || strings.Count(out, consumerLine) != 1 || strings.Index(out, consumerLine) < strings.Index(out, webhookLine) {
		t.Errorf("want one executed line of the webhook function, then one of the consumer:\n%s", out)
	}

	headers["stripe-signature"] = strings.Replace(headers["stripe-signature"], "v1=", "v1=00", 1)
	if bad := post(t, base+"/webhooks/stripe", headers, body); bad.status != 401 {
		t.Errorf("tampered signature: %d %s, want 401", bad.status, bad.body)
	}
}

func TestBase64EncodedDeliveryIsVerifiedOverTheDecodedBytes(t *testing.T) {
	base, _, _ := startServer(t)
	body, headers, err := samples.Delivery("shopify", webhook.DevSecret("shopify"), "2b4c1c1e-0000-4000-8000-000000000001", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// A content-type the gateway does not treat as text: the function receives the body in
	// base64 and must decode it before checking the HMAC.
	headers["content-type"] = "application/octet-stream"
	if a := post(t, base+"/webhooks/shopify", headers, body); a.status != 200 {
		t.Fatalf("base64-encoded delivery: %d %s", a.status, a.body)
	}
}

func TestPaymentIsCreatedOnceReplayedAndReadBack(t *testing.T) {
	base, _, _ := startServer(t)
	h := map[string]string{"content-type": "application/json", "idempotency-key": "order-localapi-1"}
	body := []byte(`{"amount":2500,"currency":"EUR"}`)
	first := post(t, base+"/payments", h, body)
	if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("create: %d %s", first.status, first.body)
	}
	var p struct {
		ID       string `json:"id"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	if err := json.Unmarshal(first.body, &p); err != nil || p.ID == "" || p.Amount != 2500 || p.Currency != "EUR" {
		t.Fatalf("create body %s: %v", first.body, err)
	}
	again := post(t, base+"/payments", h, body)
	if again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Fatalf("retry: %d replayed=%q %s", again.status, again.header.Get("Idempotent-Replayed"), again.body)
	}
	if other := post(t, base+"/payments", h, []byte(`{"amount":9900,"currency":"EUR"}`)); other.status != 422 {
		t.Errorf("same key, other body: %d %s, want 422", other.status, other.body)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/payments/"+p.ID, nil)
	if got := roundTrip(t, req); got.status != 200 || !bytes.Contains(got.body, []byte(p.ID)) {
		t.Errorf("GET /payments/%s: %d %s", p.ID, got.status, got.body)
	}
}
