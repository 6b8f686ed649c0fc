package webhook_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/webhook"
)

func envOf(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// checkConfigured runs vectors against the configurable verifier built from
// env: no code for the sender, only settings.
func checkConfigured(t *testing.T, env map[string]string, vectors []vector) *webhook.Verifier {
	t.Helper()
	p, err := webhook.HMACPresetFromEnv(envOf(env))
	if err != nil {
		t.Fatalf("HMACPresetFromEnv: %v", err)
	}
	var last *webhook.Verifier
	for _, tc := range vectors {
		t.Run(tc.name, func(t *testing.T) {
			v, err := webhook.NewVerifier(p, []string{tc.secret}, 0)
			if err != nil {
				t.Fatal(err)
			}
			last = v
			err = v.Verify(tc.req)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Verify: %v; the published vector is valid", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Verify = %v, want %v", err, tc.wantErr)
			}
		})
	}
	return last
}

// Paddle configured by settings, checked with paddle-node-sdk's
// webhooks-validator.test.ts vectors.
func TestHMACSettingsVerifyPaddle(t *testing.T) {
	nov1 := time.Date(2023, 11, 1, 0, 0, 0, 0, time.UTC)
	v := checkConfigured(t, map[string]string{
		"WEBHOOK_HMAC_HEADER":        "Paddle-Signature",
		"WEBHOOK_HMAC_HEADER_FORMAT": "ts={timestamp};h1={signature}",
		"WEBHOOK_HMAC_LAYOUT":        "{timestamp}:{body}",
		"WEBHOOK_HMAC_TOLERANCE":     "5s",
		"WEBHOOK_HMAC_EVENT_ID":      "body:event_id",
		"WEBHOOK_HMAC_EVENT_TYPE":    "body:event_type",
	}, []vector{
		{"valid signature", "VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1), nil},
		{"valid with multiple hashes", "VALID_SECRET", paddleRequest(`{"data": "value"}`, "ts=1698796800;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h2=RANDOM_HASH", nov1), nil},
		{"invalid secret", "INVALID_VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1), webhook.ErrNoValidSignature},
		{"invalid data - has more space", "VALID_SECRET", paddleRequest(`{ "data": [ "1", "2" ]}`, paddleHeader, nov1), webhook.ErrNoValidSignature},
		{"more than 5 seconds", "VALID_SECRET", paddleRequest(paddleBody, paddleHeader, nov1.Add(6*time.Second)), webhook.ErrTooOld},
		{"go valid signature", paddleGoKey, paddleRequest(paddleGoBody, paddleGoSig, time.Unix(1710929255, 0)), nil},
	})
	d, err := v.Event(paddleRequest(paddleGoBody, paddleGoSig, time.Unix(1710929255, 0)))
	if err != nil || d.ID != "evt_01hsdn97563968dy0szkmgjwh3" || d.Type != "price.created" {
		t.Fatalf("Event = %+v, %v", d, err)
	}
}

// Square configured by settings, checked with square-python-sdk's
// test_webhooks_helper.py vectors.
func TestHMACSettingsVerifySquare(t *testing.T) {
	v := checkConfigured(t, map[string]string{
		"WEBHOOK_HMAC_HEADER":   "x-square-hmacsha256-signature",
		"WEBHOOK_HMAC_ENCODING": "base64",
		"WEBHOOK_HMAC_LAYOUT":   "{url}{body}",
		"WEBHOOK_HMAC_EVENT_ID": "body:event_id",
	}, []vector{
		{"validation pass", squareKey, squareRequest(squareURL, squareBody, squareSig), nil},
		{"url mismatch", squareKey, squareRequest("https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9", squareBody, squareSig), webhook.ErrNoValidSignature},
		{"invalid signature key", "MCmhFRxGX82xMwg5FsaoQA", squareRequest(squareURL, squareBody, squareSig), webhook.ErrNoValidSignature},
		{"invalid signature header", squareKey, squareRequest(squareURL, squareBody, "1z2n3DEJJiUPKcPzQo1ftvbxGdw="), webhook.ErrInvalidHeader},
	})
	d, err := v.Event(squareRequest(squareURL, squareBody, squareSig))
	if err != nil || d.ID != "ac3ac95b-f97d-458c-a6e6-18981597e05f" {
		t.Fatalf("Event = %+v, %v", d, err)
	}
}

// Twitch EventSub configured by settings, checked with the vectors of
// TestTwitchVectors; and Razorpay with razorpay-node's
// razorpay-utils.spec.js vector.
func TestHMACSettingsVerifyTwitchAndRazorpay(t *testing.T) {
	old := twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody)
	old.Now = twitchNow.Add(11 * time.Minute)
	v := checkConfigured(t, map[string]string{
		"WEBHOOK_HMAC_HEADER":           "twitch-eventsub-message-signature",
		"WEBHOOK_HMAC_PREFIX":           "sha256=",
		"WEBHOOK_HMAC_ID_HEADER":        "twitch-eventsub-message-id",
		"WEBHOOK_HMAC_TIMESTAMP_HEADER": "twitch-eventsub-message-timestamp",
		"WEBHOOK_HMAC_TIMESTAMP_FORMAT": "rfc3339",
		"WEBHOOK_HMAC_TOLERANCE":        "10m",
		"WEBHOOK_HMAC_LAYOUT":           "{id}{timestamp}{body}",
		"WEBHOOK_HMAC_EVENT_ID":         "header",
		"WEBHOOK_HMAC_EVENT_TYPE":       "body:subscription.type",
	}, []vector{
		{"notification", twitchSecret, twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody), nil},
		{"tampered message id", twitchSecret, twitchRequest("notification", "replay-1", twitchTimestamp, twitchNotifySig, twitchNotifyBody), webhook.ErrNoValidSignature},
		{"older than 10 minutes", twitchSecret, old, webhook.ErrTooOld},
	})
	d, err := v.Event(twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody))
	if err != nil || d.ID != twitchNotifyID || d.Type != "channel.follow" {
		t.Fatalf("Event = %+v, %v", d, err)
	}
	checkConfigured(t, map[string]string{"WEBHOOK_HMAC_HEADER": "X-Razorpay-Signature"}, []vector{
		{"razorpay correct", "123456", headerRequest(`{"a":1,"b":2,"c":{"d":3}}`, "x-razorpay-signature", "2fe04e22977002e6c7cb553adab8b460cb9e2a4970d5953cb27a8472752e3bbc"), nil},
		{"razorpay wrong", "123456", headerRequest(`{"a":1,"b":2,"c":{"d":3}}`, "x-razorpay-signature", "sdfafds"), webhook.ErrInvalidHeader},
	})
}

func TestHMACSettingsDefaults(t *testing.T) {
	p, err := webhook.HMACPresetFromEnv(envOf(map[string]string{"WEBHOOK_HMAC_HEADER": "X-Sig"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Family != webhook.FamilyBodyHMAC || p.Algorithm != webhook.SHA256 || p.Encoding != webhook.Hex || p.Layout != "{body}" ||
		p.Tolerance != 0 || p.ResultTTL != 72*time.Hour || p.SignatureHeader != "x-sig" || p.EventID != (webhook.Source{}) {
		t.Fatalf("defaults: %+v", p)
	}
	p, err = webhook.HMACPresetFromEnv(envOf(map[string]string{"WEBHOOK_HMAC_HEADER": "x-sig", "WEBHOOK_HMAC_TIMESTAMP_HEADER": "x-ts"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Layout != "{timestamp}.{body}" || p.Tolerance != webhook.DefaultTolerance || p.Family != webhook.FamilyTimestampHMAC {
		t.Fatalf("with a timestamp: %+v", p)
	}
}

func TestHMACSettingsErrorsNameTheSetting(t *testing.T) {
	base := map[string]string{"WEBHOOK_HMAC_HEADER": "x-sig"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return m
	}
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "WEBHOOK_HMAC_HEADER"},
		{with("WEBHOOK_HMAC_ALGORITHM", "md5"), "WEBHOOK_HMAC_ALGORITHM"},
		{with("WEBHOOK_HMAC_ENCODING", "base32"), "WEBHOOK_HMAC_ENCODING"},
		{with("WEBHOOK_HMAC_TIMESTAMP_FORMAT", "iso"), "WEBHOOK_HMAC_TIMESTAMP_FORMAT"},
		{with("WEBHOOK_HMAC_HEADER_FORMAT", "sig={signature}"), "WEBHOOK_HMAC_HEADER_FORMAT"},
		{with("WEBHOOK_HMAC_LAYOUT", "{body}{bogus}"), "WEBHOOK_HMAC_LAYOUT"},
		{with("WEBHOOK_HMAC_LAYOUT", "{timestamp}.{body}"), "WEBHOOK_HMAC_LAYOUT"},
		{with("WEBHOOK_HMAC_LAYOUT", "{id}{body}"), "WEBHOOK_HMAC_LAYOUT"},
		{with("WEBHOOK_HMAC_TOLERANCE", "5 minutes"), "WEBHOOK_HMAC_TOLERANCE"},
		{with("WEBHOOK_HMAC_TOLERANCE", "5m"), "WEBHOOK_HMAC_TOLERANCE"}, // nothing signs a timestamp
		{with("WEBHOOK_HMAC_RESULT_TTL", "-1h"), "WEBHOOK_HMAC_RESULT_TTL"},
		{with("WEBHOOK_HMAC_EVENT_ID", "header"), "WEBHOOK_HMAC_EVENT_ID"}, // no signed id header
		{with("WEBHOOK_HMAC_EVENT_ID", "x-request-id"), "WEBHOOK_HMAC_EVENT_ID"},
		{with("WEBHOOK_HMAC_EVENT_TYPE", "topic"), "WEBHOOK_HMAC_EVENT_TYPE"},
		{with("WEBHOOK_HMAC_SECRET_FORMAT", "hex"), "WEBHOOK_HMAC_SECRET_FORMAT"},
	}
	for _, c := range cases {
		_, err := webhook.HMACPresetFromEnv(envOf(c.env))
		var se *setting.Error
		if !errors.As(err, &se) || se.Var != c.want {
			t.Errorf("%v: %v, want a *setting.Error naming %s", c.env, err, c.want)
		}
	}
}
