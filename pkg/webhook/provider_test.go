package webhook_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// testNow is the receiver's clock in tests that do not involve a reference
// library reading the real clock.
var testNow = time.Unix(1_760_000_000, 0)

// The secret each original sender's tests sign with, the first of its
// testSecrets.
const (
	githubSecret   = "gh-secret-old"
	shopifySecret  = "shpss_old0000000000000000000000000"
	slackSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	standardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stripeSecret   = "whsec_test_old_8mQ2"
)

// testSecrets are valid for every provider (Standard Webhooks needs base64).
var testSecrets = map[string][]string{
	"github":   {githubSecret, "gh-secret-new", "gh-secret-other"},
	"shopify":  {shopifySecret, "shpss_new1111111111111111111111111", "shpss_other2222222222222222222222"},
	"slack":    {slackSecret, "0b1e4d7a6c538f742231b10e8888abcd", "ffffffffffffffffffffffffffffffff"},
	"standard": {standardSecret, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "whsec_dGhpcmQgc2VjcmV0IG5vdCBhY2NlcHRlZA=="},
	"stripe":   {stripeSecret, "whsec_test_new_4kZ7", "whsec_test_other_1aB9"},
}

// The header maps carrying a signature value of the senders that sign in
// one header.
var (
	githubHeader  = headerOf("x-hub-signature-256")
	shopifyHeader = headerOf("x-shopify-hmac-sha256")
	stripeHeader  = headerOf("stripe-signature")
)

// headerOf returns the function that makes the header map carrying a value
// under name.
func headerOf(name string) func(v string) map[string]string {
	return func(v string) map[string]string { return map[string]string{name: v} }
}

// timestamped lists the providers whose scheme signs a timestamp.
var timestamped = []string{"slack", "standard", "stripe"}

// originalNames are the five senders verified before the preset table; the
// tests written for them run unchanged against their presets.
var originalNames = []string{"github", "shopify", "slack", "standard", "stripe"}

// provider drives one preset's Verifier with the header-map calls the
// original providers' tests make, and signs through webhooktest.
type provider struct {
	name string
	v    *webhook.Verifier
}

// event is what the original providers' tests read from a delivery.
type event struct {
	ID, DeliveryID, Type, ObjectID string
	Unsigned                       []string
	Challenge                      string
}

func mustNew(t testing.TB, name string, secrets ...string) provider {
	t.Helper()
	v, err := webhook.New(name, secrets, 0)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	return provider{name: name, v: v}
}

func (p provider) Name() string             { return p.name }
func (p provider) ResultTTL() time.Duration { return p.v.ResultTTL() }

func (p provider) CheckSignature(headers map[string]string, body []byte, now time.Time) error {
	return p.v.CheckSignature(webhook.Request{Header: hdr(headers), Body: body, Now: now})
}

func (p provider) Event(headers map[string]string, body []byte) (event, error) {
	d, err := p.v.Event(webhook.Request{Header: hdr(headers), Body: body})
	if err != nil {
		return event{}, err
	}
	if d.Handshake != nil {
		var answer struct{ Challenge string }
		if err := json.Unmarshal(d.Handshake.Body, &answer); err != nil {
			return event{}, err
		}
		return event{Type: string(d.Handshake.Kind), Challenge: answer.Challenge}, nil
	}
	return event{ID: d.ID, DeliveryID: d.DeliveryID, Type: d.Type, ObjectID: d.ObjectID, Unsigned: d.Unsigned}, nil
}

// Sign returns the headers the sender adds to body when signing it at now;
// a Standard Webhooks message id is the body's own id when it has one (the
// samples repeat it there), so a re-signed retry keeps it.
func (p provider) Sign(secret string, body []byte, now time.Time) map[string]string {
	preset := p.v.Preset()
	in := map[string]string{}
	if preset.IDHeader != "" {
		var top struct{ ID string }
		if json.Unmarshal(body, &top) == nil && top.ID != "" {
			in[preset.IDHeader] = top.ID
		}
	}
	signed, err := webhooktest.Sign(preset.Name, secret, webhook.Request{Header: hdr(in), Body: body, Now: now})
	if err != nil {
		return nil
	}
	return flat(signed.Header)
}

func (p provider) Sample(eventID string, now time.Time) ([]byte, map[string]string) {
	r, err := webhooktest.Sample(p.name, eventID, now)
	if err != nil {
		panic(err)
	}
	return r.Body, flat(r.Header)
}

// merged returns the union of header maps, later maps winning.
func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readJSONFixture(t testing.TB, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(readFixture(t, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

// verifyErrors are the only sentinels Verify may return.
var verifyErrors = []error{
	webhook.ErrNotSigned, webhook.ErrInvalidHeader, webhook.ErrNoValidSignature,
	webhook.ErrTooOld, webhook.ErrTooNew,
}

func isVerifyError(err error) bool {
	return slices.ContainsFunc(verifyErrors, func(target error) bool { return errors.Is(err, target) })
}

func TestNamesListsEveryProviderAndNewBuildsEach(t *testing.T) {
	for _, name := range originalNames {
		if !slices.Contains(webhook.Names(), name) {
			t.Fatalf("Names() = %v, without %s", webhook.Names(), name)
		}
	}
	if slices.Contains(webhook.Names(), "hmac") || !slices.IsSorted(webhook.Names()) {
		t.Fatalf("Names() = %v, want sorted, without hmac (NewHMAC builds it)", webhook.Names())
	}
	for _, name := range originalNames {
		if got := mustNew(t, name, testSecrets[name][0]).Name(); got != name {
			t.Errorf("New(%q).Name() = %q", name, got)
		}
	}
}

func TestNewRejectsUnknownProvider(t *testing.T) {
	for _, name := range []string{"", "Stripe", "paypal", "svix"} {
		_, err := webhook.New(name, []string{"s"}, 0)
		wantErr(t, err, webhook.ErrUnknownProvider)
	}
}

func TestNewRequiresANonEmptySecret(t *testing.T) {
	for _, name := range originalNames {
		for _, secrets := range [][]string{nil, {}, {""}, {testSecrets[name][0], ""}} {
			_, err := webhook.New(name, secrets, 0)
			wantErr(t, err, webhook.ErrNoSecret)
		}
	}
}

func TestNewRejectsNegativeTolerance(t *testing.T) {
	_, err := webhook.New("stripe", []string{"s"}, -time.Second)
	wantErr(t, err, webhook.ErrInvalidTolerance)
}

func TestNewDoesNotAliasTheSecretsSlice(t *testing.T) {
	secrets := []string{testSecrets["github"][0]}
	p := mustNew(t, "github", secrets...)
	v2, err := webhook.New("github", secrets, 0)
	if err != nil {
		t.Fatal(err)
	}
	p2 := provider{name: "github", v: v2}
	secrets[0] = "changed"
	body := []byte(`{}`)
	for _, p := range []provider{p, p2} {
		if err := p.CheckSignature(p.Sign(testSecrets["github"][0], body, testNow), body, testNow); err != nil {
			t.Fatalf("secret changed under the provider: %v", err)
		}
	}
}

func TestDefaultResultTTLOutlivesEachSendersRetries(t *testing.T) {
	want := map[string]time.Duration{
		"stripe":   96 * time.Hour,
		"github":   96 * time.Hour,
		"shopify":  72 * time.Hour,
		"standard": 48 * time.Hour,
		"slack":    24 * time.Hour,
	}
	for name, ttl := range want {
		if got := mustNew(t, name, testSecrets[name][0]).ResultTTL(); got != ttl {
			t.Errorf("%s: DefaultResultTTL() = %s, want %s", name, got, ttl)
		}
	}
}

func TestSampleSignedIsAcceptedAndYieldsItsEventID(t *testing.T) {
	for _, name := range originalNames {
		t.Run(name, func(t *testing.T) {
			secret := testSecrets[name][0]
			p := mustNew(t, name, secret)
			const id = "evt_sample_0001"
			body, extra := p.Sample(id, testNow)
			again, extraAgain := p.Sample(id, testNow)
			if string(body) != string(again) || !maps.Equal(extra, extraAgain) {
				t.Fatal("Sample is not deterministic")
			}
			if other, _ := p.Sample("evt_sample_0002", testNow); string(other) == string(body) {
				t.Fatal("Sample ignores the event id")
			}
			signed := p.Sign(secret, body, testNow)
			for _, h := range []map[string]string{merged(extra, signed), merged(signed, extra)} {
				if err := p.CheckSignature(h, body, testNow); err != nil {
					t.Fatalf("Verify: %v", err)
				}
				ev, err := p.Event(h, body)
				if err != nil {
					t.Fatalf("Event: %v", err)
				}
				if senderID(ev) != id || ev.Type == "" || ev.ObjectID == "" || ev.Challenge != "" {
					t.Fatalf("Event = %+v", ev)
				}
			}
			if !json.Valid(body) {
				t.Fatalf("sample body is not JSON: %s", body)
			}
			for k := range merged(extra, signed) {
				if k != strings.ToLower(k) {
					t.Errorf("header name %q is not lower-case", k)
				}
			}
		})
	}
}

func TestEveryProviderRejectsTamperedBodyWrongSecretAndUnsigned(t *testing.T) {
	for _, name := range originalNames {
		t.Run(name, func(t *testing.T) {
			p := mustNew(t, name, testSecrets[name][0])
			body, extra := p.Sample("evt_reject", testNow)
			good := merged(extra, p.Sign(testSecrets[name][0], body, testNow))

			tampered := append([]byte(nil), body...)
			tampered[len(tampered)/2] ^= 0x01
			wantErr(t, p.CheckSignature(good, tampered, testNow), webhook.ErrNoValidSignature)
			wantErr(t, p.CheckSignature(good, append(body, ' '), testNow), webhook.ErrNoValidSignature)
			wantErr(t, p.CheckSignature(good, nil, testNow), webhook.ErrNoValidSignature)

			wrong := merged(extra, p.Sign(testSecrets[name][2], body, testNow))
			wantErr(t, p.CheckSignature(wrong, body, testNow), webhook.ErrNoValidSignature)

			wantErr(t, p.CheckSignature(extra, body, testNow), webhook.ErrNotSigned)
			wantErr(t, p.CheckSignature(nil, body, testNow), webhook.ErrNotSigned)
			for k := range p.Sign(testSecrets[name][0], body, testNow) {
				h := maps.Clone(good)
				delete(h, k)
				if err := p.CheckSignature(h, body, testNow); err == nil {
					t.Fatalf("accepted without %s", k)
				}
				h[k] = ""
				if err := p.CheckSignature(h, body, testNow); err == nil {
					t.Fatalf("accepted with an empty %s", k)
				}
			}
		})
	}
}

func TestEveryProviderAcceptsEachRotatedSecret(t *testing.T) {
	for _, name := range originalNames {
		t.Run(name, func(t *testing.T) {
			s := testSecrets[name]
			p := mustNew(t, name, s[0], s[1])
			body, extra := p.Sample("evt_rotation", testNow)
			for _, secret := range s[:2] {
				if err := p.CheckSignature(merged(extra, p.Sign(secret, body, testNow)), body, testNow); err != nil {
					t.Errorf("secret %q refused: %v", secret, err)
				}
			}
			wantErr(t, p.CheckSignature(merged(extra, p.Sign(s[2], body, testNow)), body, testNow), webhook.ErrNoValidSignature)

			// Once the old secret is retired, its signatures stop passing.
			retired := mustNew(t, name, s[1])
			wantErr(t, retired.CheckSignature(merged(extra, retired.Sign(s[0], body, testNow)), body, testNow), webhook.ErrNoValidSignature)
		})
	}
}

func TestTimestampToleranceHoldsInBothDirections(t *testing.T) {
	for _, name := range timestamped {
		t.Run(name, func(t *testing.T) {
			secret := testSecrets[name][0]
			for _, tc := range []struct {
				tolerance time.Duration
				window    time.Duration // the effective tolerance
			}{{0, webhook.DefaultTolerance}, {10 * time.Second, 10 * time.Second}, {time.Hour, time.Hour}} {
				v, err := webhook.New(name, []string{secret}, tc.tolerance)
				if err != nil {
					t.Fatal(err)
				}
				p := provider{name: name, v: v}
				body, extra := p.Sample("evt_tolerance", testNow)
				at := func(signed time.Time) error {
					return p.CheckSignature(merged(extra, p.Sign(secret, body, signed)), body, testNow)
				}
				for _, ok := range []time.Duration{0, tc.window, -tc.window, time.Second, -time.Second} {
					if err := at(testNow.Add(ok)); err != nil {
						t.Errorf("tolerance %s: signed %s from now refused: %v", tc.window, ok, err)
					}
				}
				wantErr(t, at(testNow.Add(-tc.window-time.Second)), webhook.ErrTooOld)
				wantErr(t, at(testNow.Add(-30*24*time.Hour)), webhook.ErrTooOld)
				wantErr(t, at(time.Unix(0, 0)), webhook.ErrTooOld)
				wantErr(t, at(testNow.Add(tc.window+time.Second)), webhook.ErrTooNew)
				wantErr(t, at(testNow.Add(30*24*time.Hour)), webhook.ErrTooNew)
			}
		})
	}
}

func TestProvidersWithoutSignedTimestampIgnoreTheClock(t *testing.T) {
	for _, name := range []string{"github", "shopify"} {
		p := mustNew(t, name, testSecrets[name][0])
		body, extra := p.Sample("evt_clock", testNow)
		h := merged(extra, p.Sign(testSecrets[name][0], body, testNow))
		for _, now := range []time.Time{testNow.AddDate(1, 0, 0), testNow.AddDate(-1, 0, 0)} {
			if err := p.CheckSignature(h, body, now); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// senderID is the id the sender gave the event: Event.DeliveryID when the
// signature does not cover it, else Event.ID.
func senderID(ev event) string {
	if ev.DeliveryID != "" {
		return ev.DeliveryID
	}
	return ev.ID
}

func TestHeaderNamesNeedNotBeLowerCased(t *testing.T) {
	for _, name := range originalNames {
		p := mustNew(t, name, testSecrets[name][0])
		body, extra := p.Sample("evt_case", testNow)
		h := map[string]string{}
		for k, v := range merged(extra, p.Sign(testSecrets[name][0], body, testNow)) {
			h[strings.ToUpper(k[:1])+k[1:]] = v
		}
		if err := p.CheckSignature(h, body, testNow); err != nil {
			t.Errorf("%s: Verify: %v", name, err)
		}
		if ev, err := p.Event(h, body); err != nil || senderID(ev) != "evt_case" {
			t.Errorf("%s: Event = %+v, %v", name, ev, err)
		}
	}
}

func TestEventRejectsBodiesThatAreNotAJSONObject(t *testing.T) {
	bodies := []string{"", " ", "null", "[]", `"evt_1"`, "42", "{", `{"id":"evt_1"`, `{"id":"evt_1"} x`, "id=evt_1", "\xff\xfe{}"}
	for _, name := range originalNames {
		p := mustNew(t, name, testSecrets[name][0])
		_, extra := p.Sample("evt_bad", testNow)
		for _, b := range bodies {
			_, err := p.Event(extra, []byte(b))
			wantErr(t, err, webhook.ErrBadPayload)
		}
	}
}

func TestErrorsNeverCarryTheSecretOrExpectedSignature(t *testing.T) {
	for _, name := range originalNames {
		secret := testSecrets[name][0]
		p := mustNew(t, name, secret)
		body, extra := p.Sample("evt_leak", testNow)
		good := p.Sign(secret, body, testNow)
		tampered := append(slices.Clip(body), '\n')
		err := p.CheckSignature(merged(extra, good), tampered, testNow)
		wantErr(t, err, webhook.ErrNoValidSignature)
		expected := p.Sign(secret, tampered, testNow)
		for _, v := range expected {
			if len(v) > 16 && strings.Contains(err.Error(), v) {
				t.Errorf("%s: error reveals the expected signature: %v", name, err)
			}
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error reveals the secret: %v", name, err)
		}
	}
}

// hdr is an event's lower-cased header map as net/http holds it.
func hdr(m map[string]string) http.Header {
	h := make(http.Header, len(m))
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

// bodyDigest is the key of a delivery whose signature covers its body only.
func bodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// whsec writes key as a Standard Webhooks secret.
func whsec(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }

// flat is h as an event's lower-cased header map.
func flat(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = strings.Join(v, ",")
	}
	return out
}
