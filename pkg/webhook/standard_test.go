package webhook_test

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/idemlambda/idem/internal/preset"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

type standardVectors struct {
	Sign []struct {
		Name, Secret, ID, Body, Signature string
		Timestamp                         int64
	}
	Rejected []struct{ Name, Signature, Error string }
	Accepted []struct{ Name, Signature string }
}

func standardHeaders(id string, ts int64, sig string) map[string]string {
	return map[string]string{
		"webhook-id":        id,
		"webhook-timestamp": fmt.Sprint(ts),
		"webhook-signature": sig,
	}
}

func TestStandardPublishedVectors(t *testing.T) {
	var v standardVectors
	readJSONFixture(t, "standard_vectors.json", &v)
	for _, s := range v.Sign {
		t.Run(s.Name, func(t *testing.T) {
			at := time.Unix(s.Timestamp, 0)
			got, err := webhooktest.StandardSignature(s.Secret, s.ID, []byte(s.Body), at)
			if err != nil || got != s.Signature {
				t.Fatalf("StandardSignature = %q, %v; want %q", got, err, s.Signature)
			}
			p := mustNew(t, "standard", s.Secret)
			if err := p.CheckSignature(standardHeaders(s.ID, s.Timestamp, s.Signature), []byte(s.Body), at); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			// The reference Go library decodes only padded secrets.
			if wh, err := standardwebhooks.NewWebhook(s.Secret); err == nil {
				if theirs, _ := wh.Sign(s.ID, at, []byte(s.Body)); theirs != s.Signature {
					t.Fatalf("reference library signs %q", theirs)
				}
			}
		})
	}

	ref := v.Sign[0]
	p := mustNew(t, "standard", ref.Secret)
	at := time.Unix(ref.Timestamp, 0)
	sentinel := map[string]error{"no valid signature": webhook.ErrNoValidSignature, "invalid header": webhook.ErrInvalidHeader}
	for _, r := range v.Rejected {
		want, ok := sentinel[r.Error]
		if !ok {
			t.Fatalf("%s: unknown error %q", r.Name, r.Error)
		}
		err := p.CheckSignature(standardHeaders(ref.ID, ref.Timestamp, r.Signature), []byte(ref.Body), at)
		if !errors.Is(err, want) {
			t.Errorf("%s: error = %v, want %v", r.Name, err, want)
		}
	}
	for _, a := range v.Accepted {
		if err := p.CheckSignature(standardHeaders(ref.ID, ref.Timestamp, a.Signature), []byte(ref.Body), at); err != nil {
			t.Errorf("%s: %v", a.Name, err)
		}
	}
}

func TestStandardCrossCheckWithReferenceLibrary(t *testing.T) {
	p := mustNew(t, "standard", standardSecret)
	wh := standardReference(t)
	now := time.Now() // the reference library reads the real clock
	body, extra := p.Sample("msg_2mQ8cYp1dW6yT0aZ3kB7nR4eLx", now)

	// Ours signs, the reference verifies.
	ours := merged(extra, p.Sign(standardSecret, body, now))
	h := http.Header{}
	for k, v := range ours {
		h.Set(k, v)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("reference library refuses our signature: %v", err)
	}

	// The reference signs, ours verifies, also among other entries.
	sig, err := wh.Sign("msg_2mQ8cYp1dW6yT0aZ3kB7nR4eLx", now, body)
	if err != nil {
		t.Fatal(err)
	}
	theirs := standardHeaders("msg_2mQ8cYp1dW6yT0aZ3kB7nR4eLx", now.Unix(), sig)
	if err := p.CheckSignature(theirs, body, now); err != nil {
		t.Fatalf("reference signature refused: %v", err)
	}
	other, _ := webhooktest.StandardSignature("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "msg_2mQ8cYp1dW6yT0aZ3kB7nR4eLx", body, now)
	theirs["webhook-signature"] = other + " " + sig + " v2,abc"
	if err := p.CheckSignature(theirs, body, now); err != nil {
		t.Fatalf("multi-signature refused: %v", err)
	}
	h.Set("webhook-signature", theirs["webhook-signature"])
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("reference refuses the same multi-signature: %v", err)
	}

	// Both refuse a delivery signed for another message id.
	theirs["webhook-id"] = "msg_other"
	h.Set("webhook-id", "msg_other")
	wantErr(t, p.CheckSignature(theirs, body, now), webhook.ErrNoValidSignature)
	if wh.Verify(body, h) == nil {
		t.Fatal("reference accepted a changed message id")
	}
}

func TestStandardSecretForms(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := whsec(string(key))
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("StandardSecret = %q", secret)
	}
	for _, s := range []string{secret, strings.TrimPrefix(secret, "whsec_"), strings.TrimRight(secret, "=")} {
		got, err := preset.DecodeWhsec(s)
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("DecodeStandardSecret(%q) = %q, %v", s, got, err)
		}
	}
	for _, s := range []string{"whsec_", "whsec_!!!!", "whsec_abc$", "not base64 at all", "whsec_QUJD=", "=="} {
		_, err := preset.DecodeWhsec(s)
		wantErr(t, err, preset.ErrInvalidWhsec)
		_, err = webhook.New("standard", []string{s}, 0)
		wantErr(t, err, webhook.ErrInvalidSecret)
	}
	_, err := webhook.New("standard", []string{secret, "whsec_%%%"}, 0)
	wantErr(t, err, webhook.ErrInvalidSecret)

	p := mustNew(t, "standard", secret)
	if got := p.Sign("whsec_%%%", []byte(`{}`), testNow); got != nil {
		t.Fatalf("Sign with an undecodable secret = %v, want nil", got)
	}
}

func TestStandardRejectsMissingOrMalformedHeaders(t *testing.T) {
	p := mustNew(t, "standard", standardSecret)
	body := []byte(`{"type":"user.created"}`)
	good := p.Sign(standardSecret, body, testNow)
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		h := merged(good)
		delete(h, name)
		wantErr(t, p.CheckSignature(h, body, testNow), webhook.ErrNotSigned)
	}
	ts := good["webhook-timestamp"]
	for _, bad := range []string{"hello", ts + ".0", "-" + ts, "+" + ts, "0" + ts, ts + " ", "1e9", "99999999999999999999"} {
		h := merged(good, map[string]string{"webhook-timestamp": bad})
		wantErr(t, p.CheckSignature(h, body, testNow), webhook.ErrInvalidHeader)
	}
	sig := good["webhook-signature"]
	for _, tc := range []struct {
		header string
		want   error
	}{
		{"v1a,c2lnbmF0dXJl v2," + sig[3:], webhook.ErrNoValidSignature},
		{"V1," + sig[3:], webhook.ErrNoValidSignature},
		{"  " + sig + "  ", nil}, // empty entries between spaces are skipped
	} {
		err := p.CheckSignature(merged(good, map[string]string{"webhook-signature": tc.header}), body, testNow)
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: error = %v, want %v", tc.header, err, tc.want)
		}
	}
}

// TestStandardMalformedEntryIsANonMatch follows the reference libraries
// (github.com/standard-webhooks/standard-webhooks): libraries/go/webhook.go
// skips an entry without a comma and compares every other v1 entry as it
// stands, so a malformed entry never matches and never spoils a valid one
// beside it; libraries/go/webhook_test.go "partial signature is invalid"
// ("v1,") and libraries/javascript/src/webhook.test.ts "partial signature
// throws error" reject a header holding only malformed entries. Each case is
// also run through the reference Go library.
func TestStandardMalformedEntryIsANonMatch(t *testing.T) {
	p := mustNew(t, "standard", standardSecret)
	ref := standardReference(t)
	body := []byte(`{"type":"user.created"}`)
	good := p.Sign(standardSecret, body, testNow)
	sig := good["webhook-signature"]
	malformed := []string{
		"junk",
		",abc",
		"v1,",
		"v1,g0hM9S",
		strings.TrimRight(sig[3:], "="), // no comma at all
		"v1," + strings.TrimRight(sig[3:], "="),
		"v1," + strings.NewReplacer("+", "-", "/", "_").Replace(sig[3:]) + "+/",
		"v1," + strings.Repeat("A", 4096),
	}
	for _, m := range malformed {
		for _, tc := range []struct {
			header string
			accept bool
		}{
			{m, false},
			{m + " " + sig, true},
			{sig + " " + m, true},
		} {
			h := merged(good, map[string]string{"webhook-signature": tc.header})
			ours := p.CheckSignature(h, body, testNow)
			theirs := ref.VerifyIgnoringTimestamp(body, standardHTTPHeader(h))
			if (ours == nil) != tc.accept || (theirs == nil) != tc.accept {
				t.Errorf("%q: want accept=%v; ours: %v; reference: %v", tc.header, tc.accept, ours, theirs)
			}
			if !tc.accept {
				wantErr(t, ours, webhook.ErrNoValidSignature)
			}
		}
	}

	// Where the reference Go library is more lenient than a non-match: it reads
	// "v1,<sig>,<more>" as the v1 signature <sig>. Such an entry is malformed,
	// so here it matches nothing; the Python library
	// (libraries/python/standardwebhooks/webhooks.py) refuses it too.
	for _, header := range []string{sig + ",", sig + ",extra"} {
		h := merged(good, map[string]string{"webhook-signature": header})
		wantErr(t, p.CheckSignature(h, body, testNow), webhook.ErrNoValidSignature)
		if err := ref.VerifyIgnoringTimestamp(body, standardHTTPHeader(h)); err != nil {
			t.Fatalf("the reference library changed: it now refuses %q: %v", header, err)
		}
	}
}

// standardHTTPHeader turns API Gateway style headers into an http.Header.
func standardHTTPHeader(h map[string]string) http.Header {
	out := http.Header{}
	for k, v := range h {
		out.Set(k, v)
	}
	return out
}

func TestStandardAcceptsSvixBrandedHeaders(t *testing.T) {
	p := mustNew(t, "standard", standardSecret)
	body := readFixture(t, "events/standard_invoice_paid.json")
	signed := p.Sign(standardSecret, body, testNow)
	svix := map[string]string{
		"svix-id":        signed["webhook-id"],
		"svix-timestamp": signed["webhook-timestamp"],
		"svix-signature": signed["webhook-signature"],
	}
	if err := p.CheckSignature(svix, body, testNow); err != nil {
		t.Fatalf("Verify(svix-*): %v", err)
	}
	if ev, err := p.Event(svix, body); err != nil || ev.ID != signed["webhook-id"] {
		t.Fatalf("Event(svix-*) = %+v, %v", ev, err)
	}
	// A complete webhook-* set wins over svix-*: a bad one is not rescued.
	both := merged(svix, standardHeaders("msg_other", testNow.Unix(), signed["webhook-signature"]))
	wantErr(t, p.CheckSignature(both, body, testNow), webhook.ErrNoValidSignature)
}

func TestStandardSignTakesTheMessageIDFromTheBody(t *testing.T) {
	p := mustNew(t, "standard", standardSecret)
	withID := []byte(`{"id":"msg_fromBody","type":"x"}`)
	if got := p.Sign(standardSecret, withID, testNow)["webhook-id"]; got != "msg_fromBody" {
		t.Fatalf("webhook-id = %q", got)
	}
	body := readFixture(t, "events/standard_invoice_paid.json")
	first := p.Sign(standardSecret, body, testNow)
	retry := p.Sign(standardSecret, body, testNow.Add(time.Minute))
	if first["webhook-id"] == "" || first["webhook-id"] != retry["webhook-id"] {
		t.Fatalf("a re-signed body changed id: %q then %q", first["webhook-id"], retry["webhook-id"])
	}
	if first["webhook-signature"] == retry["webhook-signature"] {
		t.Fatal("a later signature should differ")
	}
	if other := p.Sign(standardSecret, withID, testNow); other["webhook-id"] == first["webhook-id"] {
		t.Fatal("different bodies share an id")
	}
}

func TestStandardEvent(t *testing.T) {
	p := mustNew(t, "standard", standardSecret)
	body := readFixture(t, "events/standard_invoice_paid.json")
	h := map[string]string{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek"}
	want := event{ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Type: "invoice.paid", ObjectID: "inv_2f0G8bYd3kQ1"}
	if got, err := p.Event(h, body); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Event = %+v, %v; want %+v", got, err, want)
	}
	// type and data are optional in the payload.
	if got, err := p.Event(h, []byte(`{"hello":"world"}`)); err != nil || !reflect.DeepEqual(got, event{ID: want.ID}) {
		t.Fatalf("Event = %+v, %v", got, err)
	}
	_, err := p.Event(map[string]string{}, body)
	wantErr(t, err, webhook.ErrNoEventID)
}

// standardReference returns the reference library's verifier for
// standardSecret.
func standardReference(t *testing.T) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(standardSecret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}
