package webhook_test

import (
	"errors"
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
func presetVerifier(t *testing.T, name string, secrets ...string) *webhook.Verifier {
	t.Helper()
	p, ok := webhook.Lookup(name)
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
			err := v.Verify(tc.req)
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
	if len(webhook.PresetNames()) < 18 {
		t.Fatalf("PresetNames() = %v, want at least the 18 named senders", webhook.PresetNames())
	}
	for _, name := range webhook.PresetNames() {
		p, _ := webhook.Lookup(name)
		if p.Name != name {
			t.Errorf("preset %q is named %q", name, p.Name)
		}
		secret := "s3cr3t"
		switch p.Algorithm {
		case webhook.Ed25519:
			secret = discordPublicKeyHex
		case webhook.ECDSAP256:
			secret = sendgridKey1
		}
		if _, err := webhook.NewVerifier(p, []string{secret}, 0); err != nil {
			t.Errorf("NewVerifier(%s): %v", name, err)
		}
		if p.ResultTTL <= 0 || p.Retries == "" {
			t.Errorf("preset %s: result TTL %s, retries %q: both are required", name, p.ResultTTL, p.Retries)
		}
	}
	if _, ok := webhook.Lookup("nope"); ok {
		t.Error(`Lookup("nope") found a preset`)
	}
}

func TestNewVerifierRefusesMissingSecretsAndBadPresets(t *testing.T) {
	p, _ := webhook.Lookup("square")
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
	bad, _ = webhook.Lookup("razorpay")
	bad.EventID = webhook.Source{Header: "x-razorpay-event-id"} // not signed
	if _, err := webhook.NewVerifier(bad, []string{"a"}, 0); err == nil {
		t.Error("event id from an unsigned header accepted")
	}
	d, _ := webhook.Lookup("discord")
	if _, err := webhook.NewVerifier(d, []string{"not-hex"}, 0); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("bad Ed25519 key: %v, want ErrInvalidSecret", err)
	}
	s, _ := webhook.Lookup("sendgrid")
	// sendgrid-go eventwebhook_test.go TestConvertPublicKeyBase64ToECDSA:
	// a corrupted key does not parse.
	if _, err := webhook.NewVerifier(s, []string{sendgridKey1 + "corrupting the public key"}, 0); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("corrupted ECDSA key: %v, want ErrInvalidSecret", err)
	}
}
