package devapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/devapi"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// TestRecordsExpireOnTheEmbeddedRedis: the embedded server's TTLs follow the wall clock, so a
// record goes when IDEM_RESULT_TTL says.
func TestRecordsExpireOnTheEmbeddedRedis(t *testing.T) {
	api, base := start(t, map[string]string{"IDEM_RESULT_TTL": "1s"})
	if !api.Embedded {
		t.Fatal("want the embedded Redis")
	}
	if status := deliver(t, base, "stripe", webhook.DevSecret("stripe"), "evt_expires_1"); status != 200 {
		t.Fatalf("delivery: %d", status)
	}
	ctx := context.Background()
	keys, err := api.Redis.Client.Keys(ctx, "idem:{stripe:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("records %q, %v; want the delivery's", keys, err)
	}
	// Expiry is the clock's business: wait for it, with a bound far above the TTL.
	for deadline := time.Now().Add(15 * time.Second); len(keys) > 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if keys, err = api.Redis.Client.Keys(ctx, "idem:{stripe:*").Result(); err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) != 0 {
		t.Fatalf("records %q still there long after IDEM_RESULT_TTL=1s", keys)
	}
	// Gone, the same delivery runs again.
	if status := deliver(t, base, "stripe", webhook.DevSecret("stripe"), "evt_expires_1"); status != 200 {
		t.Fatalf("delivery after expiry: %d", status)
	}
}

func TestHMACIsServedWithTheSettingsOfTheEnvironment(t *testing.T) {
	env := map[string]string{
		config.HMACHeaderSetting:  "x-acme-signature",
		config.HMACPrefixSetting:  "sha256=",
		config.HMACEventIDSetting: "body:id",
	}
	api, base := start(t, env)
	if !slices.Contains(api.Providers(), "hmac") {
		t.Fatalf("providers %v, want hmac", api.Providers())
	}
	cfg, err := config.HMACFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"acme-1","type":"order.paid"}`)
	signed, err := webhooktest.SignHMAC(cfg, webhook.DevSecret("hmac"), webhook.Request{
		Header: http.Header{}, Body: body, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "true"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/hmac", bytes.NewReader(signed.Body))
		req.Header = signed.Header.Clone()
		resp, b := testsupport.RoundTrip(t, req)
		if resp.StatusCode != 200 || resp.Header.Get("idempotent-replayed") != want {
			t.Fatalf("delivery %d: %d %s, replayed %q", i, resp.StatusCode, b, resp.Header.Get("idempotent-replayed"))
		}
	}

	// Without the settings there is no such route.
	_, plain := start(t, nil)
	req, _ := http.NewRequest(http.MethodPost, plain+"/webhooks/hmac", bytes.NewReader(signed.Body))
	if resp, _ := testsupport.RoundTrip(t, req); resp.StatusCode != 404 {
		t.Errorf("without %s: %d, want 404", config.HMACHeaderSetting, resp.StatusCode)
	}
}

func TestRoutesPathListsTheProvidersServed(t *testing.T) {
	_, base := startWith(t, devapi.Config{
		Getenv:    func(string) string { return "" },
		Providers: "Slack,Github",
	})
	req, _ := http.NewRequest(http.MethodGet, base+samtemplate.RoutesPath, nil)
	resp, b := testsupport.RoundTrip(t, req)
	var served samtemplate.Served
	if err := json.Unmarshal(b, &served); resp.StatusCode != 200 || err != nil || !slices.Equal(served.Providers, []string{"github", "slack"}) {
		t.Fatalf("%d %s: %+v %v", resp.StatusCode, b, served, err)
	}
}
