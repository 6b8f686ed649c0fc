package webhook_test

import (
	"errors"
	"github.com/idemlambda/idem/internal/preset"
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// checkConfigured runs vectors against the configurable verifier built from
// cfg: no code for the sender, only its description.
func checkConfigured(t *testing.T, cfg webhook.HMACConfig, vectors []vector) *webhook.Verifier {
	t.Helper()
	var last *webhook.Verifier
	for _, tc := range vectors {
		t.Run(tc.name, func(t *testing.T) {
			v, err := webhook.NewHMAC(cfg, []string{tc.secret})
			if err != nil {
				t.Fatal(err)
			}
			last = v
			err = v.CheckSignature(tc.req)
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
	v := checkConfigured(t, webhook.HMACConfig{
		Header:       "Paddle-Signature",
		HeaderFormat: "ts={timestamp};h1={signature}",
		Layout:       "{timestamp}:{body}",
		Tolerance:    5 * time.Second,
		EventID:      "body:event_id",
		EventType:    "body:event_type",
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
	v := checkConfigured(t, webhook.HMACConfig{
		Header:   "x-square-hmacsha256-signature",
		Encoding: "base64",
		Layout:   "{url}{body}",
		EventID:  "body:event_id",
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
	v := checkConfigured(t, webhook.HMACConfig{
		Header:          "twitch-eventsub-message-signature",
		Prefix:          "sha256=",
		IDHeader:        "twitch-eventsub-message-id",
		TimestampHeader: "twitch-eventsub-message-timestamp",
		TimestampFormat: "rfc3339",
		Tolerance:       10 * time.Minute,
		Layout:          "{id}{timestamp}{body}",
		EventID:         "header",
		EventType:       "body:subscription.type",
	}, []vector{
		{"notification", twitchSecret, twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody), nil},
		{"tampered message id", twitchSecret, twitchRequest("notification", "replay-1", twitchTimestamp, twitchNotifySig, twitchNotifyBody), webhook.ErrNoValidSignature},
		{"older than 10 minutes", twitchSecret, old, webhook.ErrTooOld},
	})
	d, err := v.Event(twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody))
	if err != nil || d.ID != twitchNotifyID || d.Type != "channel.follow" {
		t.Fatalf("Event = %+v, %v", d, err)
	}
	checkConfigured(t, webhook.HMACConfig{Header: "X-Razorpay-Signature"}, []vector{
		{"razorpay correct", "123456", headerRequest(`{"a":1,"b":2,"c":{"d":3}}`, "x-razorpay-signature", "2fe04e22977002e6c7cb553adab8b460cb9e2a4970d5953cb27a8472752e3bbc"), nil},
		{"razorpay wrong", "123456", headerRequest(`{"a":1,"b":2,"c":{"d":3}}`, "x-razorpay-signature", "sdfafds"), webhook.ErrInvalidHeader},
	})
}

func TestHMACSettingsDefaults(t *testing.T) {
	p, err := webhook.HMACPreset(webhook.HMACConfig{Header: "X-Sig"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Family != preset.FamilyBodyHMAC || p.Algorithm != preset.SHA256 || p.Encoding != preset.Hex || p.Layout != "{body}" ||
		p.Tolerance != 0 || p.ResultTTL != 72*time.Hour || p.SignatureHeader != "x-sig" || p.EventID != (preset.Source{}) {
		t.Fatalf("defaults: %+v", p)
	}
	p, err = webhook.HMACPreset(webhook.HMACConfig{Header: "x-sig", TimestampHeader: "x-ts"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Layout != "{timestamp}.{body}" || p.Tolerance != webhook.DefaultTolerance || p.Family != preset.FamilyTimestampHMAC {
		t.Fatalf("with a timestamp: %+v", p)
	}
}
