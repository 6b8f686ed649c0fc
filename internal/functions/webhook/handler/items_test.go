package handler

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// The SDK-signed vectors of package webhook (testdata/sdk/generate.js there): Adyen's test
// notification (adyen-go-api-library src/hmacvalidator/hmacvalidator_test.go's item and key,
// and a second item signed by @adyen/api-library) and Twilio SharedKey webhooks signed by
// twilio-node (npm twilio@6.3.1, lib/webhooks/webhooks.js).
const (
	sdkVectors = "../../../../pkg/webhook/testdata/sdk"
	adyenKey   = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
)

func readVector(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sdkVectors, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func adyenHarness(t *testing.T) *harness {
	return newHarness(t, "adyen", harnessConfig{env: map[string]string{EnvSecret: adyenKey}})
}

func adyenDelivery(t *testing.T, body []byte) events.APIGatewayV2HTTPRequest {
	return apiRequest(t, "adyen", body, map[string]string{"content-type": "application/json"})
}

// Adyen's published test notification, and five retries of it, forward each of its two items
// once, each keyed pspReference|eventCode with its payload marked unsigned, and are answered
// [accepted]: the first executed in 2 round trips, the retries replayed in 1.
func TestAdyenTestNotificationForwardsEachItemExactlyOnce(t *testing.T) {
	hs := adyenHarness(t)
	req := adyenDelivery(t, readVector(t, "adyen_items.json"))
	first := hs.do(t, req)
	wantStatus(t, first, 200, "")
	if first.Body != "[accepted]" || first.Headers["content-type"] != "text/plain" || first.Headers[idemhttp.HeaderReplayed] != "" {
		t.Fatalf("first delivery answered %v %q, want [accepted]", first.Headers, first.Body)
	}
	for range 5 {
		again := hs.do(t, req)
		if again.StatusCode != 200 || again.Body != "[accepted]" || again.Headers[idemhttp.HeaderReplayed] != "true" {
			t.Fatalf("retry answered %d %v %q, want the replayed [accepted]", again.StatusCode, again.Headers, again.Body)
		}
	}
	if ids, want := adyenItemIDs(t, hs.sink.sent()), []string{"pspReference|EVENT", "QFQTPCQ8HXSKGK82|CAPTURE"}; !slices.Equal(ids, want) {
		t.Fatalf("forwarded %v, want each item once: %v", ids, want)
	}
	if keys := hs.keys(t); len(keys) != 2 {
		t.Fatalf("keys %v, want one per item", keys)
	}
	lines := hs.logs.requests(t)
	if len(lines) != 6 || lines[0]["outcome"] != "executed" || lines[0]["redis_round_trips"] != 2.0 ||
		lines[1]["outcome"] != "replayed" || lines[1]["redis_round_trips"] != 1.0 {
		t.Fatalf("log lines %v, want executed in 2 round trips, then replays in 1", lines)
	}
}

// adyenItemIDs is the ids of sent, in order, each checked to be a notification item with
// its payload marked unsigned.
func adyenItemIDs(t *testing.T, sent []sink.Event) []string {
	t.Helper()
	var ids []string
	for _, e := range sent {
		ids = append(ids, e.ID)
		if !slices.Contains(e.Unsigned, "payload") || slices.Contains(e.Signed(), "payload") || !json.Valid(e.Body) || !bytes.Contains(e.Body, []byte(`"hmacSignature"`)) {
			t.Errorf("event %s: unsigned %v, body %s; want the item, its payload marked unsigned", e.ID, e.Unsigned, e.Body)
		}
	}
	return ids
}

func TestAdyenDeliveryWithATamperedItemIsRefusedBeforeAnyClaim(t *testing.T) {
	hs := adyenHarness(t)
	body := bytes.Replace(readVector(t, "adyen_items.json"), []byte(`"eventCode": "CAPTURE"`), []byte(`"eventCode": "REFUND"`), 1)
	hs.counter.Commands.Store(0)
	resp := hs.do(t, adyenDelivery(t, body))
	wantStatus(t, resp, 401, codeInvalidSignature)
	if n := hs.counter.Commands.Load(); n != 0 || len(hs.sink.sent()) != 0 {
		t.Fatalf("%d Redis commands, %d events for a refused delivery; want none", n, len(hs.sink.sent()))
	}
	// Signed with another key: refused too.
	signed, err := webhooktest.Sign("adyen", hex.EncodeToString([]byte("other")), webhook.Request{Body: readVector(t, "adyen_items.json")})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, hs.do(t, adyenDelivery(t, signed.Body)), 401, codeInvalidSignature)
}

func TestAdyenItemsFailedAreRetriedAndTheDoneOnesReplayed(t *testing.T) {
	hs := adyenHarness(t)
	hs.sink.setErr(errors.New("queue down"))
	req := adyenDelivery(t, readVector(t, "adyen_items.json"))
	wantStatus(t, hs.do(t, req), 500, codeProcessingFailed)
	if keys := hs.keys(t); len(keys) != 0 {
		t.Fatalf("keys %v after a failed forward, want every claim released", keys)
	}
	hs.sink.setErr(nil)
	if resp := hs.do(t, req); resp.StatusCode != 200 || resp.Body != "[accepted]" {
		t.Fatalf("retry: %d %s", resp.StatusCode, resp.Body)
	}
	if n := len(hs.sink.sent()); n != 2 {
		t.Fatalf("%d events after the retry, want 2", n)
	}
	// The same items again, now with one new one: only the new one runs, and the answer is not
	// a replay.
	var note map[string]any
	if err := json.Unmarshal(readVector(t, "adyen_items.json"), &note); err != nil {
		t.Fatal(err)
	}
	items := note["notificationItems"].([]any)
	third := map[string]any{"NotificationRequestItem": map[string]any{"pspReference": "NEWPSP0000000001", "eventCode": "REFUND",
		"originalReference": "pspReference", "merchantAccountCode": "merchantAccount", "merchantReference": "reference",
		"amount": map[string]any{"value": 500, "currency": "EUR"}, "success": "true", "additionalData": map[string]any{}}}
	note["notificationItems"] = append(items, third)
	b, _ := json.Marshal(note)
	signed, err := webhooktest.Sign("adyen", adyenKey, webhook.Request{Body: b})
	if err != nil {
		t.Fatal(err)
	}
	resp := hs.do(t, adyenDelivery(t, signed.Body))
	if resp.StatusCode != 200 || resp.Headers[idemhttp.HeaderReplayed] != "" {
		t.Fatalf("delivery with a new item: %d %v", resp.StatusCode, resp.Headers)
	}
	sent := hs.sink.sent()
	if len(sent) != 3 || sent[2].ID != "NEWPSP0000000001|REFUND" {
		t.Fatalf("events %v, want the new item forwarded alone", sent)
	}
}

func TestIntercomPingAndSlackRateLimitNoticeAreAnsweredWithoutExecution(t *testing.T) {
	for _, tc := range []struct{ provider, body, kind string }{
		{"intercom", `{"type":"notification_event","app_id":"a86dr8yl","data":{"type":"notification_event_data","item":{"type":"ping","message":"something something interzen"}},"links":{},"id":null,"topic":"ping","delivery_status":null,"delivery_attempts":1,"delivered_at":0,"first_sent_at":1718000000,"created_at":1718000000,"self":null}`, "intercom-ping"},
		// https://api.slack.com/events/app_rate_limited, as Slack documents it: no event_id.
		{"slack", `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","type":"app_rate_limited","team_id":"T123456","minute_rate_limited":1518467820,"api_app_id":"A123456"}`, "app_rate_limited"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			hs := newHarness(t, tc.provider, harnessConfig{})
			signed, err := webhooktest.Sign(tc.provider, testSecret(tc.provider), webhook.Request{Body: []byte(tc.body), Now: hs.clock.Now()})
			if err != nil {
				t.Fatal(err)
			}
			headers := map[string]string{"content-type": "application/json"}
			for name := range signed.Header {
				headers[strings.ToLower(name)] = signed.Header.Get(name)
			}
			hs.counter.Commands.Store(0)
			for range 3 {
				wantStatus(t, hs.do(t, apiRequest(t, tc.provider, signed.Body, headers)), 200, "")
			}
			if n := hs.counter.Commands.Load(); n != 0 || len(hs.sink.sent()) != 0 || hs.sink.attempts() != 0 {
				t.Fatalf("%d Redis commands, %d sink calls; want none", n, hs.sink.attempts())
			}
			for _, line := range hs.logs.requests(t) {
				if line["reason"] != tc.kind || line["outcome"] != "handshake" {
					t.Errorf("log line %v, want outcome handshake, reason %s", line, tc.kind)
				}
			}
			// Unsigned: refused, as any delivery.
			wantStatus(t, hs.do(t, apiRequest(t, tc.provider, []byte(tc.body), map[string]string{"content-type": "application/json"})), 401, codeMissingSignature)
		})
	}
}

func TestTwilioSharedKeyWebhookSignedByTwilioNodeIsExecutedOnce(t *testing.T) {
	var vec struct {
		SharedKey, AuthToken, Settings string
		Form                           struct{ URL, Body, Signature string }
	}
	if err := json.Unmarshal(readVector(t, "twilio_sharedkey.json"), &vec); err != nil {
		t.Fatal(err)
	}
	base, query, _ := strings.Cut(vec.Form.URL, "?")
	hs := newHarness(t, "twilio", harnessConfig{env: map[string]string{
		EnvSecret: vec.AuthToken + "," + vec.SharedKey, config.PublicURLSetting: base,
	}})
	req := apiRequest(t, "twilio", []byte(vec.Form.Body), map[string]string{
		"content-type": "application/x-www-form-urlencoded", "x-twilio-signature": vec.Form.Signature,
		"x-twilio-webhooks-signature-settings": vec.Settings,
	})
	req.RawQueryString = query
	wantStatus(t, hs.do(t, req), 200, "")
	again := hs.do(t, req)
	if again.Headers[idemhttp.HeaderReplayed] != "true" || len(hs.sink.sent()) != 1 {
		t.Fatalf("retry %v, %d events; want a replay of one event", again.Headers, len(hs.sink.sent()))
	}
	delete(req.Headers, "x-twilio-webhooks-signature-settings")
	wantStatus(t, hs.do(t, req), 401, codeInvalidSignature)
}

// TestAdyenConcurrentDeliveriesForwardEachItemOnce: 20 copies of one notification at once, then
// retries of those refused while the first was in progress, forward each item exactly once.
func TestAdyenConcurrentDeliveriesForwardEachItemOnce(t *testing.T) {
	hs := adyenHarness(t)
	req := adyenDelivery(t, readVector(t, "adyen_items.json"))
	const n = 20
	answers := make([]<-chan events.APIGatewayV2HTTPResponse, n)
	for i := range answers {
		answers[i] = goInvoke(hs.h, req)
	}
	refused := 0
	for _, ch := range answers {
		resp := within(t, ch, "a concurrent Adyen delivery")
		switch resp.StatusCode {
		case 200:
		case 409:
			refused++
		default:
			t.Fatalf("concurrent delivery answered %d %s", resp.StatusCode, resp.Body)
		}
	}
	// Adyen retries what was refused; by now every claim is complete.
	for range refused {
		if resp := hs.do(t, req); resp.StatusCode != 200 || resp.Headers[idemhttp.HeaderReplayed] != "true" {
			t.Fatalf("retry answered %d %v", resp.StatusCode, resp.Headers)
		}
	}
	if sent := hs.sink.sent(); len(sent) != 2 || sent[0].ID == sent[1].ID {
		t.Fatalf("forwarded %d events, want each of the 2 items once", len(sent))
	}
}
