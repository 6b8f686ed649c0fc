package webhook_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// Intercom's ping as its documentation shows it (topic "ping", "id": null),
// https://developers.intercom.com/docs/references/webhooks/webhook-models,
// signed as Intercom signs (X-Hub-Signature: sha1=hex HMAC-SHA1 of the body),
// by webhooktest.
const intercomPing = `{"type":"notification_event","app_id":"a86dr8yl","data":{"type":"notification_event_data","item":{"type":"ping","message":"something something interzen"}},"links":{},"id":null,"topic":"ping","delivery_status":null,"delivery_attempts":1,"delivered_at":0,"first_sent_at":1718000000,"created_at":1718000000,"self":null}`

func signedPreset(t *testing.T, name, secret, body string, headers ...string) webhook.Request {
	t.Helper()
	r, err := webhooktest.Sign(name, secret, webhook.Request{Header: headerRequest(body, headers...).Header, Body: []byte(body), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestIntercomPingIsAHandshake(t *testing.T) {
	v := presetVerifier(t, "intercom", "intercom-secret")
	r := signedPreset(t, "intercom", "intercom-secret", intercomPing)
	if err := v.CheckSignature(r); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	d, err := v.Event(r)
	if err != nil || d.Handshake == nil || d.Handshake.Kind != "intercom-ping" || d.ID != "" || d.Payload != nil {
		t.Fatalf("Event = %+v, %v; want the intercom-ping handshake", d, err)
	}
	// Unsigned or signed with another secret: refused like any delivery.
	unsigned := headerRequest(intercomPing)
	if err := v.CheckSignature(unsigned); !errors.Is(err, webhook.ErrNotSigned) {
		t.Errorf("unsigned ping: %v", err)
	}
	if err := v.CheckSignature(signedPreset(t, "intercom", "other", intercomPing)); !errors.Is(err, webhook.ErrNoValidSignature) {
		t.Errorf("ping under another secret: %v", err)
	}
	// Another topic with a null id is still an event without an id.
	other := signedPreset(t, "intercom", "intercom-secret", `{"type":"notification_event","id":null,"topic":"conversation.user.created"}`)
	if _, err := v.Event(other); !errors.Is(err, webhook.ErrNoEventID) {
		t.Errorf("null id, topic not ping: %v", err)
	}
}

func TestSlackAppRateLimitedIsAnsweredAsANotice(t *testing.T) {
	v := presetVerifier(t, "slack", "slack-secret")
	body := string(readFixture(t, "events/slack_app_rate_limited.json"))
	r := signedPreset(t, "slack", "slack-secret", body)
	if err := v.CheckSignature(r); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	d, err := v.Event(r)
	if err != nil || d.Handshake == nil || d.Handshake.Kind != "app_rate_limited" || d.ID != "" {
		t.Fatalf("Event = %+v, %v; want the app_rate_limited notice", d, err)
	}
	if err := v.CheckSignature(headerRequest(body)); !errors.Is(err, webhook.ErrNotSigned) {
		t.Errorf("unsigned notice: %v", err)
	}
	// url_verification keeps its own kind.
	uv := signedPreset(t, "slack", "slack-secret", `{"type":"url_verification","challenge":"c"}`)
	if d, err := v.Event(uv); err != nil || d.Handshake == nil || d.Handshake.Kind != "url_verification" {
		t.Errorf("url_verification: %+v, %v", d, err)
	}
}
