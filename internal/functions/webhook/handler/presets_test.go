package handler

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/preset"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// TestEveryPresetExecutesOnceThenReplays: for every preset, a delivery signed as its sender
// signs it (the public URL rebuilt from the event for URL-signing senders, a form body for
// Twilio) reaches the sink once, a second attempt is answered from the stored result, and the
// result is kept for the preset's retention.
func TestEveryPresetExecutesOnceThenReplays(t *testing.T) {
	for _, name := range webhook.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t, name, harnessConfig{})
			d := sampleDelivery(t, name, "evt_preset_"+name)
			first := hs.deliver(t, d)
			wantStatus(t, first, 200, "")
			second := hs.deliver(t, d)
			wantStatus(t, second, 200, "")
			if second.Headers[idemhttp.HeaderReplayed] != "true" || second.Body != first.Body {
				t.Fatalf("second attempt %d %v %s, want the first's answer replayed", second.StatusCode, second.Headers, second.Body)
			}
			sent := hs.sink.sent()
			if len(sent) != 1 || sent[0].Provider != name || !json.Valid(sent[0].Body) {
				t.Fatalf("sink events %+v, want one %s event with a JSON payload", sent, name)
			}
			p, _ := preset.Lookup(name)
			for key, ttl := range hs.keys(t) {
				if ttl > p.ResultTTL || ttl < p.ResultTTL-time.Minute {
					t.Errorf("key %s kept %s, want the preset's %s", key, ttl, p.ResultTTL)
				}
			}
		})
	}
}

// TestHandshakesAreAnsweredAsDocumentedWithoutRedis: each sender's endpoint validation gets
// the answer its documentation gives, with no Redis command and nothing forwarded.
func TestHandshakesAreAnsweredAsDocumentedWithoutRedis(t *testing.T) {
	for _, tc := range []struct {
		provider    string
		body        string
		headers     map[string]string
		unsigned    bool
		contentType string
		wantBody    string
	}{
		{provider: "discord", body: `{"id":"ping-1","application_id":"1","type":1,"version":1}`, contentType: "application/json",
			wantBody: `{"type":1}`},
		{provider: "zoom", body: `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`, contentType: "application/json",
			wantBody: `{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` + zoomEncryptedToken("qgg8vlvZRS6UYooatFL8Aw") + `"}`},
		{provider: "twitch", body: `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387","type":"channel.follow"}}`,
			headers: map[string]string{"twitch-eventsub-message-type": "webhook_callback_verification"}, contentType: "text/plain",
			wantBody: "pogchamp-kappa-360noscope-vohiyo"},
		{provider: "woocommerce", body: "webhook_id=42", unsigned: true, contentType: "text/plain",
			headers:  map[string]string{"content-type": "application/x-www-form-urlencoded"},
			wantBody: ""},
		{provider: "slack", body: slackURLVerification, contentType: "application/json",
			wantBody: `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			hs := newHarness(t, tc.provider, harnessConfig{})
			headers := map[string]string{"content-type": "application/json"}
			maps.Copy(headers, tc.headers)
			var req events.APIGatewayV2HTTPRequest
			if tc.unsigned {
				req = apiRequest(t, tc.provider, []byte(tc.body), headers)
			} else {
				req = delivery{provider: tc.provider, body: []byte(tc.body), headers: headers}.signed(t, testSecret(tc.provider), hs.clock.Now())
			}
			// Anyone can send WooCommerce's unsigned ping: a hundred of them must not count as
			// work done.
			times := 1
			if tc.unsigned {
				times = 100
			}
			for range times {
				resp := hs.do(t, req)
				if resp.StatusCode != 200 || resp.Headers["content-type"] != tc.contentType {
					t.Fatalf("%d %v %s, want 200 %s", resp.StatusCode, resp.Headers, resp.Body, tc.contentType)
				}
				if resp.Body != tc.wantBody {
					t.Errorf("body %q, want %q", resp.Body, tc.wantBody)
				}
			}
			lines := hs.logs.requests(t)
			if len(lines) != times {
				t.Fatalf("%d request lines, want %d", len(lines), times)
			}
			for _, l := range lines {
				// The outcome is the EMF dimension: no line counts as executed.
				if l["outcome"] != "handshake" || l["requests"] != 1.0 {
					t.Fatalf("log line %v, want outcome handshake", l)
				}
			}
			if n := hs.counter.Commands.Load(); n != 0 {
				t.Errorf("%d Redis commands for a handshake", n)
			}
			if n := hs.sink.attempts(); n != 0 {
				t.Errorf("sink called %d times for a handshake", n)
			}
		})
	}
}

// zoomEncryptedToken is Zoom's encryptedToken for plainToken: its HMAC-SHA256 under the
// secret, in hex.
func zoomEncryptedToken(plainToken string) string {
	mac := hmac.New(sha256.New, []byte(testSecret("zoom")))
	mac.Write([]byte(plainToken))
	return hex.EncodeToString(mac.Sum(nil))
}

// TestPublicURLSettingIsWhatURLSigningSendersSign: behind a custom domain the sender signs the
// URL pasted into its settings; WEBHOOK_PUBLIC_URL names it, and the URL rebuilt from the
// event no longer verifies.
func TestPublicURLSettingIsWhatURLSigningSendersSign(t *testing.T) {
	const public = "https://hooks.example.com/twilio"
	hs := newHarness(t, "twilio", harnessConfig{env: map[string]string{config.PublicURLSetting: public}})
	sample, err := webhooktest.Sample("twilio", "SM0000000000000000000000000000public", fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	signAt := func(url string) events.APIGatewayV2HTTPRequest {
		r := sample
		r.URL, r.Now = url, hs.clock.Now()
		signed, err := webhooktest.Sign("twilio", testSecret("twilio"), r)
		if err != nil {
			t.Fatal(err)
		}
		return apiRequest(t, "twilio", signed.Body, apigw.EventHeaders(signed.Header))
	}
	rebuilt := apiRequest(t, "twilio", nil, nil)
	wantStatus(t, hs.do(t, signAt(apigw.PublicURL(rebuilt.RequestContext.DomainName, rebuilt.RawPath, "", ""))), 401, "invalid_signature")
	wantStatus(t, hs.do(t, signAt(public)), 200, "")
}

// TestHMACProviderIsConfiguredBySettings: WEBHOOK_PROVIDER=hmac with the WEBHOOK_HMAC_*
// settings serves /webhooks/hmac and verifies what the settings describe.
func TestHMACProviderIsConfiguredBySettings(t *testing.T) {
	settings := map[string]string{
		EnvProvider:                 "hmac",
		config.HMACHeaderSetting:    "X-Signature",
		config.HMACPrefixSetting:    "sha256=",
		config.HMACResultTTLSetting: "30h",
		config.HMACEventIDSetting:   "body:id",
	}
	hs := newHarness(t, "hmac", harnessConfig{env: settings})
	cfg, err := config.HMACFromEnv(func(k string) string { return settings[k] })
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_hmac_1","type":"thing.happened"}`)
	signed, err := webhooktest.SignHMAC(cfg, testSecret("hmac"), webhook.Request{Body: body, Header: http.Header{"Content-Type": {"application/json"}}, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	req := apiRequest(t, "hmac", body, apigw.EventHeaders(signed.Header))
	wantStatus(t, hs.do(t, req), 200, "")
	if r := hs.do(t, req); r.Headers[idemhttp.HeaderReplayed] != "true" {
		t.Fatalf("second delivery %d %v, want a replay", r.StatusCode, r.Headers)
	}
	if sent := hs.sink.sent(); len(sent) != 1 || sent[0].ID != "evt_hmac_1" {
		t.Fatalf("sink events %+v", sent)
	}
	for key, ttl := range hs.keys(t) {
		if ttl > 30*time.Hour || ttl < 30*time.Hour-time.Minute {
			t.Errorf("key %s kept %s, want 30h", key, ttl)
		}
	}
	unsigned := apiRequest(t, "hmac", body, map[string]string{"content-type": "application/json"})
	wantStatus(t, hs.do(t, unsigned), 401, "missing_signature")
}
