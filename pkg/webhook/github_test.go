package webhook_test

import (
	"bytes"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-github/v75/github"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

func TestGitHubDocumentedTestVector(t *testing.T) {
	var v struct{ Secret, Body, Signature string }
	readJSONFixture(t, "github_docs_vector.json", &v)
	body := []byte(v.Body)
	if got := webhooktest.GitHubSignature(v.Secret, body); got != v.Signature {
		t.Fatalf("GitHubSignature = %q, documented %q", got, v.Signature)
	}
	p := mustNew(t, "github", v.Secret)
	if err := p.CheckSignature(githubHeader(v.Signature), body, testNow); err != nil {
		t.Fatalf("Verify(documented vector): %v", err)
	}
	wantErr(t, p.CheckSignature(githubHeader(v.Signature), []byte("Hello, World?"), testNow), webhook.ErrNoValidSignature)
	if err := github.ValidateSignature(v.Signature, body, []byte(v.Secret)); err != nil {
		t.Fatalf("go-github refuses the documented vector: %v", err)
	}
}

func TestGoGitHubAcceptsOurSignature(t *testing.T) {
	p := mustNew(t, "github", githubSecret)
	body, extra := p.Sample("2d1c9a40-1f0e-11f0-8a2b-3c3f2e4d5a6b", testNow)
	sig := p.Sign(githubSecret, body, testNow)["x-hub-signature-256"]
	if err := github.ValidateSignature(sig, body, []byte(githubSecret)); err != nil {
		t.Fatalf("go-github ValidateSignature: %v", err)
	}
	payload, err := github.ValidatePayloadFromBody(extra["content-type"], bytes.NewReader(body), sig, []byte(githubSecret))
	if err != nil {
		t.Fatalf("go-github ValidatePayloadFromBody: %v", err)
	}
	ev, err := github.ParseWebHook(extra["x-github-event"], payload)
	if err != nil {
		t.Fatalf("go-github ParseWebHook: %v", err)
	}
	push, ok := ev.(*github.PushEvent)
	if !ok {
		t.Fatalf("go-github parsed a %T", ev)
	}
	ours, err := p.Event(extra, body)
	if err != nil {
		t.Fatal(err)
	}
	if ours.ObjectID != push.GetRepo().GetFullName() {
		t.Fatalf("ObjectID %q, go-github repository %q", ours.ObjectID, push.GetRepo().GetFullName())
	}
	if err := github.ValidateSignature(sig, body, []byte("gh-secret-other")); err == nil {
		t.Fatal("go-github accepted our signature under another secret")
	}
}

// TestGitHubAgreesWithGoGitHub runs sha256 signature headers through both
// verifiers and expects the same verdict.
func TestGitHubAgreesWithGoGitHub(t *testing.T) {
	p := mustNew(t, "github", githubSecret)
	body := readFixture(t, "events/github_push.json")
	good := webhooktest.GitHubSignature(githubSecret, body)
	hexDigest := strings.TrimPrefix(good, "sha256=")
	for _, tc := range []struct {
		name, header string
		accept       bool
	}{
		{"valid", good, true},
		{"upper-case hex", "sha256=" + strings.ToUpper(hexDigest), true},
		{"wrong secret", webhooktest.GitHubSignature("gh-secret-other", body), false},
		{"signature of another body", webhooktest.GitHubSignature(githubSecret, append(body, '\n')), false},
		{"truncated", good[:len(good)-2], false},
		{"not hex", "sha256=" + strings.Repeat("g", 64), false},
		{"empty digest", "sha256=", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours := p.CheckSignature(githubHeader(tc.header), body, testNow)
			theirs := github.ValidateSignature(tc.header, body, []byte(githubSecret))
			if (ours == nil) != tc.accept || (theirs == nil) != tc.accept {
				t.Fatalf("want accept=%v; ours: %v; go-github: %v", tc.accept, ours, theirs)
			}
		})
	}
}

func TestGitHubRejectsMalformedOrLegacySignatures(t *testing.T) {
	p := mustNew(t, "github", githubSecret)
	body := readFixture(t, "events/github_push.json")
	good := webhooktest.GitHubSignature(githubSecret, body)
	digest := strings.TrimPrefix(good, "sha256=")

	// Only the legacy SHA-1 header: not signed the way we accept.
	legacy := map[string]string{"x-hub-signature": "sha1=" + digest[:40]}
	wantErr(t, p.CheckSignature(legacy, body, testNow), webhook.ErrNotSigned)

	for _, tc := range []struct {
		header string
		want   error
	}{
		{"sha1=" + digest[:40], webhook.ErrInvalidHeader},
		{"sha512=" + digest + digest, webhook.ErrInvalidHeader},
		{"SHA256=" + digest, webhook.ErrInvalidHeader},
		{digest, webhook.ErrInvalidHeader},
		{"sha256=", webhook.ErrInvalidHeader},
		{"sha256=" + digest[:63], webhook.ErrInvalidHeader},
		{"sha256=" + digest + "0", webhook.ErrInvalidHeader},
		{"sha256=" + digest + " ", webhook.ErrInvalidHeader},
		{" " + good, webhook.ErrInvalidHeader},
		{good + "," + good, webhook.ErrInvalidHeader},
		{"sha256=" + digest[:62] + "zz", webhook.ErrInvalidHeader},
	} {
		err := p.CheckSignature(githubHeader(tc.header), body, testNow)
		if !isVerifyError(err) || !errors.Is(err, tc.want) {
			t.Errorf("%q: error = %v, want %v", tc.header, err, tc.want)
		}
	}
}

// TestGitHubEventTakesDeliveryAndEventHeaders: the key comes from the signed
// body, the delivery GUID and event name from the unsigned headers, marked so.
func TestGitHubEventTakesDeliveryAndEventHeaders(t *testing.T) {
	p := mustNew(t, "github", githubSecret)
	headers := map[string]string{
		"content-type":      "application/json",
		"x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"x-github-event":    "push",
	}
	push := readFixture(t, "events/github_push.json")
	got, err := p.Event(headers, push)
	want := event{
		ID:         bodyDigest(push),
		DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "push", ObjectID: "Codertocat/Hello-World",
		Unsigned: []string{"delivery_id", "type"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Event = %+v, %v; want %+v", got, err, want)
	}

	// An organization hook's ping names no repository.
	headers["x-github-event"] = "ping"
	got, err = p.Event(headers, readFixture(t, "events/github_org_ping.json"))
	if err != nil || got.ObjectID != "Octocoders" || got.Type != "ping" {
		t.Fatalf("ping Event = %+v, %v", got, err)
	}

	delete(headers, "x-github-delivery")
	_, err = p.Event(headers, readFixture(t, "events/github_push.json"))
	wantErr(t, err, webhook.ErrNoEventID)
}

func TestGitHubEventReadsFormEncodedDeliveries(t *testing.T) {
	p := mustNew(t, "github", githubSecret)
	push := readFixture(t, "events/github_push.json")
	form := []byte(url.Values{"payload": {string(push)}}.Encode())
	headers := map[string]string{
		"content-type":      "application/x-www-form-urlencoded",
		"x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"x-github-event":    "push",
	}
	// The signature covers the form as sent.
	signed := merged(headers, p.Sign(githubSecret, form, testNow))
	if err := p.CheckSignature(signed, form, testNow); err != nil {
		t.Fatal(err)
	}
	if _, err := github.ValidatePayloadFromBody("application/x-www-form-urlencoded", bytes.NewReader(form), signed["x-hub-signature-256"], []byte(githubSecret)); err != nil {
		t.Fatalf("go-github refuses the form delivery: %v", err)
	}
	got, err := p.Event(signed, form)
	if err != nil || got.ObjectID != "Codertocat/Hello-World" {
		t.Fatalf("Event = %+v, %v", got, err)
	}

	for _, bad := range []string{"payload=", "other=1", "payload=%zz", "payload=not+json"} {
		_, err := p.Event(headers, []byte(bad))
		wantErr(t, err, webhook.ErrBadPayload)
	}
	// The same form without its content type is not JSON.
	delete(headers, "content-type")
	_, err = p.Event(headers, form)
	wantErr(t, err, webhook.ErrBadPayload)
}
