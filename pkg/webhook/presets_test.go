package webhook_test

import (
	"encoding/hex"
	"errors"
	"github.com/idemlambda/idem/internal/preset"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// vector is one published example: a delivery, the secret it is checked
// with, and the published verdict (want nil: accepted).
type vector struct {
	name    string
	secret  string
	req     webhook.Request
	wantErr error
}

// presetVerifier returns the verifier of a named preset.
func presetVerifier(t testing.TB, name string, secrets ...string) *webhook.Verifier {
	t.Helper()
	p, ok := preset.Lookup(name)
	if !ok {
		t.Fatalf("Lookup(%q): no such preset", name)
	}
	v, err := webhook.NewVerifier(p, secrets, 0)
	if err != nil {
		t.Fatalf("NewVerifier(%s): %v", name, err)
	}
	return v
}

// checkVectors runs each vector against a fresh verifier of the preset.
func checkVectors(t *testing.T, preset string, vectors []vector) {
	t.Helper()
	for _, tc := range vectors {
		t.Run(tc.name, func(t *testing.T) {
			v := presetVerifier(t, preset, tc.secret)
			err := v.CheckSignature(tc.req)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Verify: %v; the published vector is valid", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Verify = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestEveryPresetIsValid(t *testing.T) {
	if len(webhook.Names()) < 18 {
		t.Fatalf("PresetNames() = %v, want at least the 18 named senders", webhook.Names())
	}
	for _, name := range webhook.Names() {
		p, _ := preset.Lookup(name)
		if p.Name != name {
			t.Errorf("preset %q is named %q", name, p.Name)
		}
		secret := "s3cr3t"
		switch p.Algorithm {
		case preset.Ed25519:
			secret = discordPublicKeyHex
		case preset.ECDSAP256:
			secret = sendgridKey1
		}
		if p.Family == preset.FamilyItemHMAC {
			secret = hex.EncodeToString([]byte(secret)) // Adyen's keys are hex
		}
		if _, err := webhook.NewVerifier(p, []string{secret}, 0); err != nil {
			t.Errorf("NewVerifier(%s): %v", name, err)
		}
		if p.ResultTTL <= 0 || p.Retries == "" {
			t.Errorf("preset %s: result TTL %s, retries %q: both are required", name, p.ResultTTL, p.Retries)
		}
	}
	if _, ok := preset.Lookup("nope"); ok {
		t.Error(`Lookup("nope") found a preset`)
	}
}

func TestNewVerifierRefusesMissingSecretsAndBadPresets(t *testing.T) {
	p, _ := preset.Lookup("square")
	if _, err := webhook.NewVerifier(p, nil, 0); !errors.Is(err, webhook.ErrNoSecret) {
		t.Errorf("no secrets: %v, want ErrNoSecret", err)
	}
	if _, err := webhook.NewVerifier(p, []string{"a", ""}, 0); !errors.Is(err, webhook.ErrNoSecret) {
		t.Errorf("empty secret: %v, want ErrNoSecret", err)
	}
	if _, err := webhook.NewVerifier(p, []string{"a"}, -time.Second); !errors.Is(err, webhook.ErrInvalidTolerance) {
		t.Errorf("negative tolerance: %v, want ErrInvalidTolerance", err)
	}
	bad := p
	bad.Layout = "{body}{nope}"
	if _, err := webhook.NewVerifier(bad, []string{"a"}, 0); err == nil {
		t.Error("unknown placeholder accepted")
	}
	bad = p
	bad.Layout = "{body}" // a URL family must sign the URL
	if _, err := webhook.NewVerifier(bad, []string{"a"}, 0); err == nil {
		t.Error("URL family without {url} accepted")
	}
	bad, _ = preset.Lookup("razorpay")
	bad.EventID = preset.Source{Header: "x-razorpay-event-id"} // not signed
	if _, err := webhook.NewVerifier(bad, []string{"a"}, 0); err == nil {
		t.Error("event id from an unsigned header accepted")
	}
	d, _ := preset.Lookup("discord")
	if _, err := webhook.NewVerifier(d, []string{"not-hex"}, 0); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("bad Ed25519 key: %v, want ErrInvalidSecret", err)
	}
	s, _ := preset.Lookup("sendgrid")
	// sendgrid-go eventwebhook_test.go TestConvertPublicKeyBase64ToECDSA:
	// a corrupted key does not parse.
	if _, err := webhook.NewVerifier(s, []string{sendgridKey1 + "corrupting the public key"}, 0); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("corrupted ECDSA key: %v, want ErrInvalidSecret", err)
	}
}

func TestAmbiguousBodyIDsAreRefused(t *testing.T) {
	v := presetVerifier(t, "square", "k")
	for name, body := range map[string]string{
		"event_id twice":          `{"event_id":"A","event_id":"B","type":"t"}`,
		"event_id twice, escaped": `{"event_id":"A","event_\u0069d":"B"}`,
		"lone surrogate":          `{"event_id":"\ud800x"}`,
		"invalid UTF-8":           "{\"event_id\":\"\xff\"}",
		"not an object":           `["event_id"]`,
	} {
		_, err := v.Event(webhook.Request{Body: []byte(body)})
		if !errors.Is(err, webhook.ErrBadPayload) {
			t.Errorf("%s: %v, want ErrBadPayload", name, err)
		}
	}
	if _, err := v.Event(webhook.Request{Body: []byte(`{"type":"t"}`)}); !errors.Is(err, webhook.ErrNoEventID) {
		t.Errorf("no event_id: %v, want ErrNoEventID", err)
	}
	// A duplicate elsewhere in the body does not matter to the id.
	d, err := v.Event(webhook.Request{Body: []byte(`{"event_id":"A","data":{"x":1,"x":2}}`)})
	if err != nil || d.ID != "A" {
		t.Errorf("duplicate outside the id path: %+v, %v", d, err)
	}
}

func TestVerifyErrorsNeverQuoteTheHeader(t *testing.T) {
	v := presetVerifier(t, "paddle", "k")
	huge := "ts=1;h1=" + strings.Repeat("A", 500_000)
	err := v.CheckSignature(webhook.Request{Header: hdr(map[string]string{"paddle-signature": huge}), Body: []byte("{}"), Now: time.Unix(1, 0)})
	if err == nil || len(err.Error()) > 256 {
		t.Fatalf("error of %d bytes", len(err.Error()))
	}
}

func TestSecretsRotate(t *testing.T) {
	// The Square vector verifies when its key is any of the configured ones.
	v := presetVerifier(t, "square", "old-key", squareKey)
	if err := v.CheckSignature(squareRequest(squareURL, squareBody, squareSig)); err != nil {
		t.Fatal(err)
	}
	if v.ResultTTL() != 72*time.Hour || v.Preset().Name != "square" {
		t.Fatalf("ttl %s, preset %q", v.ResultTTL(), v.Preset().Name)
	}
}

func TestNewKnowsEveryName(t *testing.T) {
	for _, name := range webhook.Names() {
		if v, err := webhook.New(name, []string{webhook.DevSecret(name)}, 0); err != nil || v.Preset().Name != name {
			t.Errorf("New(%s): %v", name, err)
		}
	}
	if _, err := webhook.New("nope", []string{"s"}, 0); !errors.Is(err, webhook.ErrUnknownProvider) {
		t.Errorf("unknown: %v", err)
	}
}
