package webhook_test

import (
	"encoding/hex"
	"errors"
	"github.com/idemlambda/idem/internal/preset"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// fuzzSecret is long enough that no input guesses it.
const fuzzSecret = "fuzz-secret-8f1d2c3b4a5e6f708192a3b4c5d6e7f8"

// maxErrorLen bounds a verification error: errors never quote the request.
const maxErrorLen = 512

// FuzzPresetSignatureHeaders feeds hostile signature, timestamp and id
// headers and bodies to every preset: nothing verifies, nothing panics, and
// no error repeats the input at length.
func FuzzPresetSignatureHeaders(f *testing.F) {
	f.Add(uint8(0), "ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9", "1698796800", "msg", []byte(`{"data": ["1", "2"]}`))
	f.Add(uint8(1), "t=1,v1=zz,v1=,t=2", "", "", []byte(`{}`))
	f.Add(uint8(2), "sha256=", "2019-11-16T10:11:12.634234626Z", "id", []byte(`{"challenge":"x"}`))
	f.Add(uint8(3), strings.Repeat("v1=ab;", 100), "-1", "", []byte(`{"signature":{"timestamp":"1","token":"t","signature":"00"}}`))
	f.Add(uint8(4), "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=", "1588788367", "", []byte("[]\r\n"))
	f.Add(uint8(16), "", "", "", []byte("webhook_id=42"))
	names := webhook.Names()
	f.Fuzz(func(t *testing.T, which uint8, sig, ts, id string, body []byte) {
		p, _ := preset.Lookup(names[int(which)%len(names)])
		v, err := webhook.NewVerifier(p, []string{fuzzSecretFor(p)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		h := hostileHeaders(p, sig, ts, id)
		r := webhook.Request{Header: hdr(h), Body: body, URL: "https://hooks.example.com/x?" + id, Now: time.Unix(1700000000, 0)}
		err = v.CheckSignature(r)
		if err == nil {
			// The one unsigned request let through is WooCommerce's ping,
			// answered with nothing done.
			if d, _ := v.Event(r); p.Handshake == preset.HandshakeWooCommercePing && d.Handshake != nil && sig == "" {
				return
			}
			t.Fatalf("%s: a forged delivery verified: sig %q", p.Name, sig)
		}
		if len(err.Error()) > maxErrorLen {
			t.Fatalf("%s: error of %d bytes", p.Name, len(err.Error()))
		}
		// Event must not panic on anything either.
		if d, err := v.Event(r); err == nil && !utf8.ValidString(d.ID) {
			t.Fatalf("%s: id %q", p.Name, d.ID)
		}
	})
}

// fuzzSecretFor is a usable secret for p: fuzzSecret in the form p's scheme
// takes, or a public key where p verifies signatures by one.
func fuzzSecretFor(p preset.Preset) string {
	switch {
	case p.Family == preset.FamilyItemHMAC:
		return hex.EncodeToString([]byte(fuzzSecret)) // Adyen's keys are hex
	case p.SecretFormat == preset.SecretWhsec:
		return whsec(fuzzSecret)
	case p.Algorithm == preset.Ed25519:
		return discordPublicKeyHex
	case p.Algorithm == preset.ECDSAP256:
		return sendgridKey1
	}
	return fuzzSecret
}

// hostileHeaders are p's signature, timestamp and id headers carrying sig,
// ts and id; where p names one header for two of them, sig or id wins.
func hostileHeaders(p preset.Preset, sig, ts, id string) map[string]string {
	h := map[string]string{"content-type": "application/json"}
	for _, name := range []string{p.SignatureHeader, p.TimestampHeader, p.IDHeader} {
		if name != "" {
			h[name] = ts
		}
	}
	if p.SignatureHeader != "" {
		h[p.SignatureHeader] = sig
	}
	if p.IDHeader != "" {
		h[p.IDHeader] = id
	}
	return h
}

// FuzzTwilioFormBodies signs arbitrary form bodies the way Twilio does
// (webhooktest, written apart from the verifier) and checks the verifier
// accepts exactly those that parse, with one id for every order of the
// same parameters.
func FuzzTwilioFormBodies(f *testing.F) {
	f.Add("CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212")
	f.Add("Digits=5678&Digits=1234&Digits=1234&Sid=CA123&SidAccount=AC123")
	f.Add("a=%zz")
	f.Add("=&&=x;y")
	f.Add("Body=It%27s+amazing&MessagingBinding.Address=%2B1415xxxxxxx")
	p, _ := preset.Lookup("twilio")
	v, err := webhook.NewVerifier(p, []string{fuzzSecret}, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := webhook.Request{Body: []byte(body), URL: "https://hooks.example.com/twilio?foo=1", Header: hdr(map[string]string{"content-type": "application/x-www-form-urlencoded"})}
		signed, signErr := webhooktest.Sign(p.Name, fuzzSecret, r)
		_, parseErr := url.ParseQuery(body)
		if signErr != nil {
			if parseErr == nil {
				t.Fatalf("Sign: %v", signErr)
			}
			return
		}
		err := v.CheckSignature(signed)
		if (err == nil) != (parseErr == nil && strings.Count(body, "&") < 1000) {
			t.Fatalf("Verify = %v for a body that parses: %v", err, parseErr == nil)
		}
		if err != nil {
			return
		}
		values, _ := url.ParseQuery(body)
		reordered := signed
		reordered.Body = []byte(values.Encode())
		if err := v.CheckSignature(reordered); err != nil {
			t.Fatalf("the same parameters re-encoded: %v", err)
		}
		a, errA := v.Event(signed)
		b, errB := v.Event(reordered)
		if errA != nil || errB != nil || a.ID != b.ID {
			t.Fatalf("ids %q (%v) and %q (%v)", a.ID, errA, b.ID, errB)
		}
	})
}

// FuzzBodyEmbeddedSignature feeds arbitrary bodies to the Mailgun scheme,
// whose signature, token and timestamp are read from the JSON body, and to
// the body-field event ids: a body signed by webhooktest verifies; nothing
// else does; ambiguous ids are refused.
func FuzzBodyEmbeddedSignature(f *testing.F) {
	f.Add([]byte(`{"signature":{"timestamp":"1403645220","token":"5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6","signature":"9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33"},"event-data":{"event":"delivered"}}`))
	f.Add([]byte(`{"signature":{"token":"a","token":"b"},"event-data":{}}`))
	f.Add([]byte(`{"signature":{"token":"\ud800"}}`))
	f.Add([]byte(`{"event_id":"A","event_id":"B"}`))
	f.Add([]byte(`[1,2,{"x":"y"}]`))
	mailgun, _ := preset.Lookup("mailgun")
	mv, err := webhook.NewVerifier(mailgun, []string{fuzzSecret}, 0)
	if err != nil {
		f.Fatal(err)
	}
	sv := presetVerifier(f, "square", fuzzSecret)
	f.Fuzz(func(t *testing.T, body []byte) {
		r := webhook.Request{Body: body, Header: hdr(map[string]string{}), URL: "https://x/y"}
		if err := mv.CheckSignature(r); err == nil {
			t.Fatalf("a forged Mailgun body verified: %q", body)
		} else if len(err.Error()) > maxErrorLen {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
		if signed, err := webhooktest.Sign(mailgun.Name, fuzzSecret, webhook.Request{Body: body, Now: time.Unix(1700000000, 0)}); err == nil {
			if err := mv.CheckSignature(signed); err != nil && !errors.Is(err, webhook.ErrBadPayload) {
				t.Fatalf("a body signed as Mailgun signs did not verify: %v (%q)", err, signed.Body)
			}
		}
		d, err := sv.Event(r)
		if err == nil {
			if d.ID == "" || !utf8.ValidString(d.ID) || strings.ContainsRune(d.ID, utf8.RuneError) {
				t.Fatalf("id %q from %q", d.ID, body)
			}
			if strings.Count(string(body), `"event_id"`) > 1 && !strings.Contains(string(body), `\`) && strings.Count(string(body), "{") == 1 {
				t.Fatalf("a body naming event_id twice gave id %q", d.ID)
			}
		}
	})
}
