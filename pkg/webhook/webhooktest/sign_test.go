package webhooktest_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idemlambda/idem/internal/preset"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// Private keys for the public-key presets: RFC 8032 section 7.1 test 1
// (Ed25519) and the key of sendgrid/sendgrid-go
// helpers/eventwebhook/eventwebhook_test.go (testPrivateKey, ECDSA P-256).
const (
	ed25519Seed  = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	sendgridPriv = "MHcCAQEEIEQmZgBEh9DcU9zMl34czK3xov4AYvm9P3r7rNB2dNXtoAoGCCqGSM49AwEHoUQDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
	sendgridPub  = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
)

// keys returns what the sender signs with and what the verifier is given.
func keys(t *testing.T, p preset.Preset) (signWith, verifyWith string) {
	t.Helper()
	switch p.Algorithm {
	case preset.Ed25519:
		pub, err := webhooktest.PublicKey(p.Algorithm, ed25519Seed)
		if err != nil {
			t.Fatal(err)
		}
		return ed25519Seed, pub
	case preset.ECDSAP256:
		pub, err := webhooktest.PublicKey(p.Algorithm, sendgridPriv)
		if err != nil || pub != sendgridPub {
			t.Fatalf("PublicKey = %q, %v; want sendgrid-go's testPublicKey", pub, err)
		}
		return sendgridPriv, sendgridPub
	}
	if p.Family == preset.FamilyItemHMAC {
		// Adyen's HMAC keys are hex (the key of adyen-go-api-library's
		// src/hmacvalidator/hmacvalidator_test.go).
		return adyenKey, adyenKey
	}
	return "whsec_c2VjcmV0LWZvci0" + p.Name, "whsec_c2VjcmV0LWZvci0" + p.Name
}

const adyenKey = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"

// TestEverySampleSignedIsVerifiedAndKeepsItsID: every preset's sample, signed
// by webhooktest, verifies with its event id; re-signed later it keeps the id;
// with its body changed it is refused.
func TestEverySampleSignedIsVerifiedAndKeepsItsID(t *testing.T) {
	now := time.Now()
	for _, name := range webhook.Names() {
		t.Run(name, func(t *testing.T) {
			p, _ := preset.Lookup(name)
			signWith, verifyWith := keys(t, p)
			v, err := webhook.New(name, []string{verifyWith}, 0)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for i := range 2 {
				eventID := fmt.Sprintf("evt-%s-%d", name, i)
				r, signed := signedSample(t, p, signWith, eventID, now)
				d := verifiedEvent(t, v, p, signed, eventID)
				ids[d.ID] = true
				checkResignedKeepsID(t, v, p, signWith, r, signed, d.ID)
				checkTamperedRefused(t, v, p, signed)
			}
			if len(ids) != 2 {
				t.Fatalf("two events, ids %v", ids)
			}
		})
	}
}

// signedSample is p's sample delivery of eventID, and that delivery signed
// with signWith.
func signedSample(t *testing.T, p preset.Preset, signWith, eventID string, now time.Time) (r, signed webhook.Request) {
	t.Helper()
	r, err := webhooktest.Sample(p.Name, eventID, now)
	if err != nil {
		t.Fatal(err)
	}
	r.URL = "https://hooks.example.com/webhooks/" + p.Name + "?x=1"
	signed, err = webhooktest.Sign(p.Name, signWith, r)
	if err != nil {
		t.Fatal(err)
	}
	return r, signed
}

// verifiedEvent verifies signed and checks it is an event keyed on eventID
// (for Adyen, its one item, keyed pspReference|eventCode).
func verifiedEvent(t *testing.T, v *webhook.Verifier, p preset.Preset, signed webhook.Request, eventID string) webhook.Delivery {
	t.Helper()
	d, err := v.Verify(signed)
	if err != nil {
		t.Fatalf("Verify(signed sample): %v", err)
	}
	if len(d.Items) == 1 {
		d = d.Items[0]
		if !strings.HasPrefix(d.ID, eventID+"|") {
			t.Fatalf("item ID = %q, want %q and the event code", d.ID, eventID)
		}
	} else if (p.EventID.Field != "" || p.EventID.Header != "") && p.Name != "mailgun" && d.ID != eventID {
		t.Fatalf("ID = %q, want %q", d.ID, eventID)
	}
	if d.Handshake != nil || d.ID == "" {
		t.Fatalf("Event = %+v, want an event", d)
	}
	return d
}

// checkResignedKeepsID checks that signing the same delivery again (a retry,
// a second later) keeps the id.
func checkResignedKeepsID(t *testing.T, v *webhook.Verifier, p preset.Preset, signWith string, r, signed webhook.Request, id string) {
	t.Helper()
	again, err := webhooktest.Sign(p.Name, signWith, webhook.Request{Body: signed.Body, Header: r.Header, URL: r.URL, Now: r.Now.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	again.Now = again.Now.Add(time.Second)
	d2, err := v.Verify(again)
	if err == nil && len(d2.Items) == 1 {
		d2 = d2.Items[0]
	}
	if err != nil || d2.ID != id {
		t.Fatalf("re-signed: %+v, %v; first id %q", d2, err, id)
	}
}

// checkTamperedRefused checks that any change to a signed part of the body
// is refused (Mailgun signs the token, not the body).
func checkTamperedRefused(t *testing.T, v *webhook.Verifier, p preset.Preset, signed webhook.Request) {
	t.Helper()
	if p.Name == "mailgun" {
		return
	}
	tampered := signed
	tampered.Body = append(append([]byte{}, signed.Body...), ' ')
	if p.Family == preset.FamilyItemHMAC {
		// Adyen signs eight fields of each item, not the body: change a
		// signed one.
		tampered.Body = bytes.Replace(signed.Body, []byte(`"value":1000`), []byte(`"value":1001`), 1)
	}
	if _, err := v.Verify(tampered); !errors.Is(err, webhook.ErrNoValidSignature) && p.Family != preset.FamilyToken {
		t.Fatalf("tampered body: %v", err)
	}
}

func TestSignedSamplesWithAnotherSecretAreRefused(t *testing.T) {
	for _, name := range webhook.Names() {
		p, _ := preset.Lookup(name)
		if p.Family == preset.FamilyPublicKey {
			continue
		}
		right, wrong := "whsec_cmlnaHQtc2VjcmV0", "whsec_d3Jvbmctc2VjcmV0"
		if p.Family == preset.FamilyItemHMAC {
			right, wrong = hex.EncodeToString([]byte(right)), hex.EncodeToString([]byte(wrong))
		}
		v, err := webhook.New(name, []string{right}, 0)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := webhooktest.Sample(name, "evt-1", time.Now())
		r.URL = "https://hooks.example.com/x"
		signed, err := webhooktest.Sign(p.Name, wrong, r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(signed); !errors.Is(err, webhook.ErrNoValidSignature) {
			t.Errorf("%s: signed with another secret: %v", name, err)
		}
	}
}

func TestUnknownSample(t *testing.T) {
	if _, err := webhooktest.Sample("nope", "x", time.Now()); err == nil {
		t.Fatal("a sample for an unknown preset")
	}
}

func TestDevSigningSecretSignsForTheDevSecret(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	for _, name := range webhook.Names() {
		p, _ := preset.Lookup(name)
		v, err := webhook.New(name, []string{webhook.DevSecret(name)}, 0)
		if err != nil {
			t.Fatalf("%s: the development secret is not usable: %v", name, err)
		}
		r, err := webhooktest.Sample(name, "evt_dev_1", now)
		if err != nil {
			t.Fatal(err)
		}
		r.URL = "https://dev.example/webhooks/" + name
		signed, err := webhooktest.Sign(p.Name, webhooktest.DevSigningSecret(name), r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(signed); err != nil {
			t.Errorf("%s: a delivery signed with DevSigningSecret is refused: %v", name, err)
		}
		if _, ok := preset.IsDevSecret(p, webhook.DevSecret(name)); !ok {
			t.Errorf("%s: IsDevSecret does not recognise DevSecret", name)
		}
	}
}
