package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

func slackHeaders(ts, sig string) map[string]string {
	return map[string]string{"x-slack-request-timestamp": ts, "x-slack-signature": sig}
}

func TestSlackDocumentedExample(t *testing.T) {
	var v struct{ Secret, Timestamp, Body, Signature string }
	readJSONFixture(t, "slack_docs_vector.json", &v)
	var ts int64
	if _, err := fmt.Sscan(v.Timestamp, &ts); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(ts, 0)
	body := []byte(v.Body)
	if got := webhooktest.SlackSignature(v.Secret, body, at); got != v.Signature {
		t.Fatalf("SlackSignature = %q, documented %q", got, v.Signature)
	}
	p := mustNew(t, "slack", v.Secret)
	h := slackHeaders(v.Timestamp, v.Signature)
	if err := p.CheckSignature(h, body, at.Add(299*time.Second)); err != nil {
		t.Fatalf("Verify(documented example): %v", err)
	}
	wantErr(t, p.CheckSignature(h, body, at.Add(301*time.Second)), webhook.ErrTooOld)
	wantErr(t, p.CheckSignature(h, body, at.Add(-301*time.Second)), webhook.ErrTooNew)
	wantErr(t, p.CheckSignature(slackHeaders(fmt.Sprint(ts+1), v.Signature), body, at), webhook.ErrNoValidSignature)

	// The example is a slash command, form-encoded: verified, but not an
	// Events API delivery.
	_, err := p.Event(h, body)
	wantErr(t, err, webhook.ErrBadPayload)
}

func slackGoVerify(headers map[string]string, body []byte, secret string) error {
	h := http.Header{}
	for k, v := range headers {
		h.Set(k, v)
	}
	sv, err := slack.NewSecretsVerifier(h, secret)
	if err != nil {
		return err
	}
	if _, err := sv.Write(body); err != nil {
		return err
	}
	return sv.Ensure()
}

func TestSlackGoAcceptsOurSignature(t *testing.T) {
	p := mustNew(t, "slack", slackSecret)
	now := time.Now() // slack-go reads the real clock
	body, _ := p.Sample("Ev08MFMKH6J2", now)
	if err := slackGoVerify(p.Sign(slackSecret, body, now), body, slackSecret); err != nil {
		t.Fatalf("slack-go refuses our signature: %v", err)
	}
	if err := slackGoVerify(p.Sign("another-secret", body, now), body, slackSecret); err == nil {
		t.Fatal("slack-go accepted a signature under another secret")
	}
}

// TestSlackAgreesWithSlackGo runs headers through both verifiers at the real
// clock and expects the same verdict.
func TestSlackAgreesWithSlackGo(t *testing.T) {
	p := mustNew(t, "slack", slackSecret)
	now := time.Now()
	body := readFixture(t, "events/slack_event_callback.json")
	ts := fmt.Sprint(now.Unix())
	good := webhooktest.SlackSignature(slackSecret, body, now)
	digest := strings.TrimPrefix(good, "v0=")
	stale := now.Add(-301 * time.Second)
	future := now.Add(301 * time.Second)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		accept  bool
	}{
		{"valid", slackHeaders(ts, good), true},
		{"upper-case hex", slackHeaders(ts, "v0="+strings.ToUpper(digest)), true},
		{"wrong secret", slackHeaders(ts, webhooktest.SlackSignature("another-secret", body, now)), false},
		{"timestamp changed", slackHeaders(fmt.Sprint(now.Unix()-1), good), false},
		{"stale", slackHeaders(fmt.Sprint(stale.Unix()), webhooktest.SlackSignature(slackSecret, body, stale)), false},
		{"future", slackHeaders(fmt.Sprint(future.Unix()), webhooktest.SlackSignature(slackSecret, body, future)), false},
		{"other version", slackHeaders(ts, "v1="+digest), false},
		{"truncated", slackHeaders(ts, good[:len(good)-2]), false},
		{"not hex", slackHeaders(ts, "v0="+strings.Repeat("x", 64)), false},
		{"no timestamp", slackHeaders("", good), false},
		{"no signature", slackHeaders(ts, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours := p.CheckSignature(tc.headers, body, now)
			theirs := slackGoVerify(tc.headers, body, slackSecret)
			if (ours == nil) != tc.accept || (theirs == nil) != tc.accept {
				t.Fatalf("want accept=%v; ours: %v; slack-go: %v", tc.accept, ours, theirs)
			}
		})
	}
}

func TestSlackRejectsMalformedHeaders(t *testing.T) {
	p := mustNew(t, "slack", slackSecret)
	body := []byte(`{"type":"event_callback","event_id":"Ev1"}`)
	ts := fmt.Sprint(testNow.Unix())
	good := webhooktest.SlackSignature(slackSecret, body, testNow)
	digest := strings.TrimPrefix(good, "v0=")
	for _, tc := range []struct {
		ts, sig string
		want    error
	}{
		{"", good, webhook.ErrNotSigned},
		{ts, "", webhook.ErrNotSigned},
		{ts, digest, webhook.ErrInvalidHeader},
		{ts, "v0=", webhook.ErrInvalidHeader},
		{ts, "v0:" + digest, webhook.ErrInvalidHeader},
		{ts, "V0=" + digest, webhook.ErrInvalidHeader},
		{ts, "v0=" + digest[:63], webhook.ErrInvalidHeader},
		{ts, good + "00", webhook.ErrInvalidHeader},
		{ts, good + "," + good, webhook.ErrInvalidHeader},
		{"abc", good, webhook.ErrInvalidHeader},
		{ts + ".5", good, webhook.ErrInvalidHeader},
		{"-" + ts, good, webhook.ErrInvalidHeader},
		{"0" + ts, good, webhook.ErrInvalidHeader},
		{" " + ts, good, webhook.ErrInvalidHeader},
	} {
		err := p.CheckSignature(slackHeaders(tc.ts, tc.sig), body, testNow)
		if !errors.Is(err, tc.want) {
			t.Errorf("ts %q sig %q: error = %v, want %v", tc.ts, tc.sig, err, tc.want)
		}
	}
}

func TestSlackEvent(t *testing.T) {
	p := mustNew(t, "slack", slackSecret)
	for _, tc := range []struct {
		fixture string
		want    event
	}{
		{"events/slack_event_callback.json", event{ID: "Ev123ABC456", Type: "app_mention", ObjectID: "T123ABC456/C123ABC456"}},
		// channel is an object here, not an id: the team alone groups it.
		{"events/slack_channel_created.json", event{ID: "Ev0PV52K21", Type: "channel_created", ObjectID: "T123ABC456"}},
		{"events/slack_url_verification.json", event{Type: "url_verification", Challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}},
	} {
		got, err := p.Event(nil, readFixture(t, tc.fixture))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Event = %+v, %v; want %+v", tc.fixture, got, err, tc.want)
		}
	}

	// app_rate_limited, as Slack documents it (no event_id): a notice,
	// answered like a handshake, never an event.
	notice, err := p.Event(nil, readFixture(t, "events/slack_app_rate_limited.json"))
	if err != nil || !reflect.DeepEqual(notice, event{Type: "app_rate_limited"}) {
		t.Errorf("app_rate_limited: Event = %+v, %v; want the app_rate_limited notice", notice, err)
	}
	_, err = p.Event(nil, []byte(`{"type":"url_verification","challenge":""}`))
	wantErr(t, err, webhook.ErrBadPayload)
	_, err = p.Event(nil, []byte(`{"type":"url_verification","challenge":42,"event_id":"Ev1"}`))
	wantErr(t, err, webhook.ErrBadPayload)
	_, err = p.Event(nil, []byte(`{"type":"event_callback","event_id":7}`))
	wantErr(t, err, webhook.ErrNoEventID)
}
