package webhook_test

import (
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// Square's published vectors. Sources: square/square-python-sdk
// tests/utilities/test_webhooks_helper.py (TestWebhooksHelper) and
// square/square-nodejs-sdk tests/integration/webhooks.test.ts
// ("Test webhooks signature validation").
const (
	squareBody = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
	squareKey  = "Ibxx_5AKakO-3qeNVR61Dw"
	squareURL  = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
	squareSig  = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="
)

func squareRequest(rawURL, body, sig string) webhook.Request {
	return webhook.Request{URL: rawURL, Body: []byte(body), Header: hdr(map[string]string{
		"content-type": "application/json", "x-square-hmacsha256-signature": sig,
	})}
}

func TestSquarePublishedVectors(t *testing.T) {
	checkVectors(t, "square", []vector{
		// test_signature_validation_pass / "validation pass"
		{"validation pass", squareKey, squareRequest(squareURL, squareBody, squareSig), nil},
		// nodejs "unescaped chars validation pass"
		{"unescaped chars", "signature-key", squareRequest("https://webhook.site/webhooks", `{"data":{"type":"webhooks","id":"fake_id"}}`, "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA="), nil},
		// nodejs "signature with escaped characters"
		{"escaped chars", "signature-key", squareRequest("https://webhook.site/webhooks", `{"data":{"type":"webhooks","id":">id<"}}`, "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U="), nil},
		// test_signature_validation_url_mismatch
		{"url mismatch", squareKey, squareRequest("https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9", squareBody, squareSig), webhook.ErrNoValidSignature},
		// test_signature_validation_invalid_signature_key
		{"invalid signature key", "MCmhFRxGX82xMwg5FsaoQA", squareRequest(squareURL, squareBody, squareSig), webhook.ErrNoValidSignature},
		// test_signature_validation_invalid_signature_header
		{"invalid signature header", squareKey, squareRequest(squareURL, squareBody, "1z2n3DEJJiUPKcPzQo1ftvbxGdw="), webhook.ErrInvalidHeader},
		// test_signature_validation_body_mismatch
		{"body mismatch", squareKey, squareRequest(squareURL, `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-06-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`, squareSig), webhook.ErrNoValidSignature},
		// test_signature_validation_body_formatted
		{"body formatted", squareKey, squareRequest(squareURL, "{\n    \"merchant_id\": \"MLEFBHHSJGVHD\",\n    \"type\": \"webhooks.test_notification\",\n    \"event_id\": \"ac3ac95b-f97d-458c-a6e6-18981597e05f\",\n    \"created_at\": \"2022-07-13T20:30:59.037339943Z\",\n    \"data\": {\n      \"type\": \"webhooks\",\n      \"id\": \"bc368e64-01aa-407e-b46e-3231809b1129\"\n    }\n}", squareSig), webhook.ErrNoValidSignature},
		// test_signature_validation_empty_notification_url
		{"empty notification url", squareKey, squareRequest("", squareBody, squareSig), webhook.ErrNoPublicURL},
	})
}

func TestSquareEventComesFromTheSignedBody(t *testing.T) {
	v := presetVerifier(t, "square", squareKey)
	d, err := v.Event(squareRequest(squareURL, squareBody, squareSig))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "ac3ac95b-f97d-458c-a6e6-18981597e05f" || d.Type != "webhooks.test_notification" || d.ObjectID != "bc368e64-01aa-407e-b46e-3231809b1129" || len(d.Unsigned) != 0 {
		t.Fatalf("Event = %+v, want the square test notification's ids, all signed", d)
	}
}

// Paddle's published vectors. Sources: PaddleHQ/paddle-node-sdk
// src/__tests__/notifications/webhooks-validator.test.ts (describe
// "webhooks-validator", clock faked to 2023-11-01T00:00:00Z) and
// PaddleHQ/paddle-go-sdk webhook_verifier_test.go (TestVerifier_Verify).
const (
	paddleBody   = `{"data": ["1", "2"]}`
	paddleHeader = "ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9"
	paddleGoKey  = "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr"
	paddleGoSig  = "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8"
	paddleGoBody = `{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`
)

func paddleRequest(body, sig string, now time.Time) webhook.Request {
	h := map[string]string{"content-type": "application/json"}
	if sig != "" {
		h["paddle-signature"] = sig
	}
	return webhook.Request{Body: []byte(body), Header: hdr(h), Now: now}
}

func TestPaddlePublishedVectors(t *testing.T) {
	nov1 := time.Date(2023, 11, 1, 0, 0, 0, 0, time.UTC)
	checkVectors(t, "paddle", []vector{
		{"node valid signature", "VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1), nil},
		{"node valid signature with multiple hashes", "VALID_SECRET", paddleRequest(`{"data": "value"}`, "ts=1698796800;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h2=RANDOM_HASH", nov1), nil},
		{"node invalid secret", "INVALID_VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1), webhook.ErrNoValidSignature},
		{"node invalid timestamp", "VALID_SECRET", paddleRequest(paddleBody, "ts=9876;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9", nov1), webhook.ErrTooOld},
		{"node invalid data - has more space", "VALID_SECRET", paddleRequest(`{ "data": [ "1", "2" ]}`, paddleHeader, nov1), webhook.ErrNoValidSignature},
		{"node invalid signature", "VALID_SECRET", paddleRequest(paddleBody, "ts=1234;h1=invalid_signature", nov1), webhook.ErrNoValidSignature},
		{"node missing ts and h1", "VALID_SECRET", paddleRequest(paddleBody, "invalid_header", nov1), webhook.ErrInvalidHeader},
		{"node missing ts", "VALID_SECRET", paddleRequest(paddleBody, "h1=invalid_header", nov1), webhook.ErrInvalidHeader},
		{"node missing h1", "VALID_SECRET", paddleRequest(paddleBody, "ts=1234;h2=invalid_header", nov1), webhook.ErrNoValidSignature},
		// node timing cases: 5 seconds allowed
		{"node within 5 seconds", "VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1.Add(time.Second)), nil},
		{"node at 5 seconds", "VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1.Add(5*time.Second)), nil},
		{"node more than 5 seconds", "VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1.Add(6*time.Second)), webhook.ErrTooOld},
		{"node a few days later", "VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1.Add(4*24*time.Hour)), webhook.ErrTooOld},
		// go TestVerifier_Verify (its timestamp is old: the clock is set to it)
		{"go valid signature", paddleGoKey, paddleRequest(paddleGoBody, paddleGoSig, time.Unix(1710929255, 0)), nil},
		{"go missing signature", paddleGoKey, paddleRequest(paddleGoBody, "", time.Unix(1710929255, 0)), webhook.ErrNotSigned},
		{"go invalid payload", paddleGoKey, paddleRequest("{}", paddleGoSig, time.Unix(1710929255, 0)), webhook.ErrNoValidSignature},
		{"go invalid signature format", paddleGoKey, paddleRequest(paddleGoBody, "ts=x;h1=y", time.Unix(1710929255, 0)), webhook.ErrNoValidSignature},
		{"go invalid secret key", "abc", paddleRequest(paddleGoBody, paddleGoSig, time.Unix(1710929255, 0)), webhook.ErrNoValidSignature},
	})
}

func TestPaddleEventIDIsTheSignedEventID(t *testing.T) {
	v := presetVerifier(t, "paddle", paddleGoKey)
	d, err := v.Event(paddleRequest(paddleGoBody, paddleGoSig, time.Unix(1710929255, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "evt_01hsdn97563968dy0szkmgjwh3" || d.Type != "price.created" || d.ObjectID != "pri_01hsdn96k2hxjzsq5yerecdj9j" {
		t.Fatalf("Event = %+v, want evt_01hsdn97563968dy0szkmgjwh3, price.created, pri_01hsdn96k2hxjzsq5yerecdj9j", d)
	}
}
