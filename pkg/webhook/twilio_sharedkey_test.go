package webhook_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// twilioSharedKeyVectors are signed by twilio-node itself (npm twilio@6.3.1,
// lib/webhooks/webhooks.js: getSignatureAlgorithm, getExpectedTwilioSignature,
// checked there with validateRequest and validateRequestWithBody), by
// testdata/sdk/generate.js. The header follows twilio/twilio-node
// examples/WebhookSignatureValidation.md: "X-Twilio-Webhooks-Signature-Settings:
// key=<sid>,algorithm=HMAC_SHA256", the signed string unchanged. The sha1 row
// is Twilio's own documentation example (auth token 12345).
type twilioSharedKeyVectors struct {
	SharedKey, AuthToken, Settings string
	Form, JSON, SHA1               struct{ URL, Body, Signature string }
}

func twilioRequest(url, body, signature, settings string) webhook.Request {
	h := map[string]string{"x-twilio-signature": signature, "content-type": "application/x-www-form-urlencoded"}
	if strings.HasPrefix(body, "{") {
		h["content-type"] = "application/json"
	}
	if settings != "" {
		h["x-twilio-webhooks-signature-settings"] = settings
	}
	return webhook.Request{Header: hdr(h), Body: []byte(body), URL: url}
}

func TestTwilioSharedKeySignedByTwilioNodeIsAccepted(t *testing.T) {
	var vec twilioSharedKeyVectors
	readJSONFixture(t, "sdk/twilio_sharedkey.json", &vec)
	// The SharedKey secret beside the Auth Token, as an operator configures both.
	v := presetVerifier(t, "twilio", vec.AuthToken, vec.SharedKey)
	form := twilioRequest(vec.Form.URL, vec.Form.Body, vec.Form.Signature, vec.Settings)
	if err := v.CheckSignature(form); err != nil {
		t.Fatalf("SharedKey form webhook: %v", err)
	}
	if err := v.CheckSignature(twilioRequest(vec.JSON.URL, vec.JSON.Body, vec.JSON.Signature, vec.Settings)); err != nil {
		t.Fatalf("SharedKey JSON webhook (bodySHA256): %v", err)
	}
	// Without the header, HMAC-SHA1 with the Auth Token, as before.
	legacy := twilioRequest(vec.SHA1.URL, vec.SHA1.Body, vec.SHA1.Signature, "")
	if err := v.CheckSignature(legacy); err != nil {
		t.Fatalf("Auth Token (HMAC-SHA1) webhook: %v", err)
	}
	// The algorithm changes nothing of the key: both are the digest of one content.
	d1, err1 := v.Event(form)
	d2, err2 := v.Event(legacy)
	if err1 != nil || err2 != nil || d1.ID != d2.ID || !strings.HasPrefix(d1.ID, "sha256:") {
		t.Fatalf("keys %q (%v) and %q (%v), want one digest", d1.ID, err1, d2.ID, err2)
	}
	// Either secret in either place: an SHA-256 under the Auth Token verifies
	// too (every configured secret is tried), as a rotation needs.
	if err := presetVerifier(t, "twilio", vec.SharedKey).CheckSignature(form); err != nil {
		t.Fatalf("SharedKey alone: %v", err)
	}
}

func TestTwilioSharedKeyTamperedIsRefused(t *testing.T) {
	var vec twilioSharedKeyVectors
	readJSONFixture(t, "sdk/twilio_sharedkey.json", &vec)
	v := presetVerifier(t, "twilio", vec.AuthToken, vec.SharedKey)
	for _, tc := range []struct {
		name string
		r    webhook.Request
		want error
	}{
		{"settings header dropped", twilioRequest(vec.Form.URL, vec.Form.Body, vec.Form.Signature, ""), webhook.ErrInvalidHeader},
		{"declared SHA-1", twilioRequest(vec.Form.URL, vec.Form.Body, vec.Form.Signature, "key=x,algorithm=HMAC_SHA1"), webhook.ErrInvalidHeader},
		{"SHA-1 signature declared SHA-256", twilioRequest(vec.SHA1.URL, vec.SHA1.Body, vec.SHA1.Signature, vec.Settings), webhook.ErrInvalidHeader},
		{"unsupported algorithm", twilioRequest(vec.Form.URL, vec.Form.Body, vec.Form.Signature, "key=x,algorithm=HMAC_SHA512"), webhook.ErrInvalidHeader},
		{"parameter changed", twilioRequest(vec.Form.URL, strings.Replace(vec.Form.Body, "Digits=1234", "Digits=9999", 1), vec.Form.Signature, vec.Settings), webhook.ErrNoValidSignature},
		{"URL changed", twilioRequest(vec.Form.URL+"&x=1", vec.Form.Body, vec.Form.Signature, vec.Settings), webhook.ErrNoValidSignature},
		{"JSON body changed", twilioRequest(vec.JSON.URL, strings.Replace(vec.JSON.Body, "ABCDE", "ABCDF", 1), vec.JSON.Signature, vec.Settings), webhook.ErrNoValidSignature},
		{"settings header of 2 KB", twilioRequest(vec.Form.URL, vec.Form.Body, vec.Form.Signature, vec.Settings+strings.Repeat(",x=y", 512)), webhook.ErrInvalidHeader},
	} {
		if err := v.CheckSignature(tc.r); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Under another secret, refused.
	if err := presetVerifier(t, "twilio", vec.AuthToken).CheckSignature(twilioRequest(vec.Form.URL, vec.Form.Body, vec.Form.Signature, vec.Settings)); !errors.Is(err, webhook.ErrNoValidSignature) {
		t.Errorf("SharedKey signature, only the Auth Token configured: %v", err)
	}
}

// twilio-node's getSignatureAlgorithm: the first non-empty algorithm=
// element, spaces trimmed, names compared without case; none means HMAC_SHA1.
func TestTwilioSignatureSettingsAreReadAsTwilioNodeReadsThem(t *testing.T) {
	var vec twilioSharedKeyVectors
	readJSONFixture(t, "sdk/twilio_sharedkey.json", &vec)
	v := presetVerifier(t, "twilio", vec.SharedKey)
	for _, settings := range []string{
		"algorithm=HMAC_SHA256,key=webhooks_sharedkey_01",
		" key = k , algorithm = hmac_sha256 ",
		"algorithm=,algorithm=HMAC_SHA256",
		"key=k,,algorithm=HMAC_SHA256,algorithm=HMAC_SHA1",
	} {
		if err := v.CheckSignature(twilioRequest(vec.Form.URL, vec.Form.Body, vec.Form.Signature, settings)); err != nil {
			t.Errorf("settings %q: %v", settings, err)
		}
	}
	sha1 := presetVerifier(t, "twilio", vec.AuthToken)
	for _, settings := range []string{"key=k", "key=k,algorithm=", "algorithm", "key=k,algorithm=HMAC_SHA1"} {
		if err := sha1.CheckSignature(twilioRequest(vec.SHA1.URL, vec.SHA1.Body, vec.SHA1.Signature, settings)); err != nil {
			t.Errorf("settings %q means HMAC-SHA1: %v", settings, err)
		}
	}
}

// webhooktest signs a SharedKey delivery exactly as twilio-node does.
func TestWebhooktestSignsSharedKeyDeliveriesAsTwilioNode(t *testing.T) {
	var vec twilioSharedKeyVectors
	readJSONFixture(t, "sdk/twilio_sharedkey.json", &vec)
	jsonBase, _, _ := strings.Cut(vec.JSON.URL, "?") // webhooktest adds bodySHA256
	for _, c := range []struct{ url, body, signedURL, want string }{
		{vec.Form.URL, vec.Form.Body, vec.Form.URL, vec.Form.Signature},
		{jsonBase, vec.JSON.Body, vec.JSON.URL, vec.JSON.Signature},
	} {
		r := twilioRequest(c.url, c.body, "", vec.Settings)
		r.Header.Del("x-twilio-signature")
		signed, err := webhooktest.Sign("twilio", vec.SharedKey, r)
		if err != nil {
			t.Fatal(err)
		}
		if got := signed.Header.Get("x-twilio-signature"); got != c.want || signed.URL != c.signedURL {
			t.Errorf("%s: webhooktest signed %q at %s, twilio-node %q at %s", c.url, got, signed.URL, c.want, c.signedURL)
		}
	}
}
