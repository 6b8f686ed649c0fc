package webhook_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// labelSecrets returns what provider's sender signs with and what its
// verifier is given.
func labelSecrets(t *testing.T, provider string) (signWith, verifyWith string) {
	t.Helper()
	if private, public := webhooktest.KeyPair(provider, "labels"); private != "" {
		return private, public
	}
	if p, _ := preset.Lookup(provider); p.Family == preset.FamilyItemHMAC {
		key := hex.EncodeToString([]byte("labels-secret")) // Adyen's keys are hex
		return key, key
	}
	return whsec("labels-secret"), whsec("labels-secret")
}

// oneEvent is the event a delivery carries: itself, or its only item (Adyen).
func oneEvent(d webhook.Delivery) webhook.Delivery {
	if len(d.Items) == 1 {
		return d.Items[0]
	}
	return d
}

// labelled is what a delivery says of each field a label names.
func labelled(d webhook.Delivery) map[string]string {
	return map[string]string{"id": d.ID, "delivery_id": d.DeliveryID, "type": d.Type, "object_id": d.ObjectID, "payload": string(d.Payload)}
}

// tamperings returns the ways an attacker holding one signed delivery can
// change it without the secret: append to the body, rewrite any header
// other than the signature's own, or rewrite a member of the body the
// sender's scheme reads (its id, type and object fields).
func tamperings(t *testing.T, p preset.Preset, r webhook.Request) []webhook.Request {
	t.Helper()
	var out []webhook.Request
	appended := r
	appended.Body = append(bytes.Clone(r.Body), ' ')
	out = append(out, appended)
	for name := range r.Header {
		if strings.EqualFold(name, p.SignatureHeader) || strings.EqualFold(name, "content-type") {
			continue
		}
		changed := r
		changed.Header = r.Header.Clone()
		changed.Header.Set(name, "tampered-"+strings.ToLower(name))
		out = append(out, changed)
	}
	for _, field := range []string{p.EventID.Field, p.EventType.Field, p.ObjectField} {
		for _, path := range strings.FieldsFunc(field, func(r rune) bool { return r == ',' || r == '|' || r == '+' }) {
			if body, ok := withMember(r.Body, path, "tampered"); ok {
				changed := r
				changed.Body = body
				out = append(out, changed)
			}
		}
	}
	if p.Family == preset.FamilyItemHMAC {
		// Adyen signs eight fields of each item: rewrite another one.
		if body := bytes.Replace(r.Body, []byte(`"paymentMethod":"visa"`), []byte(`"paymentMethod":"tampered"`), 1); !bytes.Equal(body, r.Body) {
			changed := r
			changed.Body = body
			out = append(out, changed)
		}
	}
	return out
}

// withMember returns body with the member at a dotted path set to value,
// when body is a JSON object that has it.
func withMember(body []byte, path, value string) ([]byte, bool) {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return nil, false
	}
	keys := strings.Split(path, ".")
	obj := doc
	for _, k := range keys[:len(keys)-1] {
		next, ok := obj[k].(map[string]any)
		if !ok {
			return nil, false
		}
		obj = next
	}
	if _, ok := obj[keys[len(keys)-1]]; !ok {
		return nil, false
	}
	obj[keys[len(keys)-1]] = value
	b, err := json.Marshal(doc)
	return b, err == nil
}

// TestUnsignedLabelsAreWhatTheSchemeLeavesOut derives, for every sender, which
// fields of a delivery the signature leaves open: a field is unsigned when
// some change an attacker can make without the secret still verifies and
// changes it. Delivery.Unsigned must name exactly those (GitLab's token binds
// no bytes; Mailgun signs its timestamp and token only).
func TestUnsignedLabelsAreWhatTheSchemeLeavesOut(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	for _, name := range webhook.Names() {
		t.Run(name, func(t *testing.T) {
			p, _ := preset.Lookup(name)
			signWith, verifyWith := labelSecrets(t, name)
			v, err := webhook.New(name, []string{verifyWith}, 0)
			if err != nil {
				t.Fatal(err)
			}
			sample, err := webhooktest.Sample(name, "evt_labels_1", now)
			if err != nil {
				t.Fatal(err)
			}
			sample.URL = "https://hooks.example.com/webhooks/" + name
			signed, err := webhooktest.Sign(name, signWith, sample)
			if err != nil {
				t.Fatal(err)
			}
			d, err := v.Verify(signed)
			if err != nil {
				t.Fatal(err)
			}
			first := labelled(oneEvent(d))
			open := map[string]bool{}
			for _, changed := range tamperings(t, p, signed) {
				td, err := v.Verify(changed)
				if err != nil {
					continue // the signature covers what changed
				}
				for field, value := range labelled(oneEvent(td)) {
					if value != first[field] {
						open[field] = true
					}
				}
			}
			var want []string
			for _, field := range []string{"id", "delivery_id", "type", "object_id", "payload"} {
				if open[field] {
					want = append(want, field)
				}
			}
			unsigned := oneEvent(d).Unsigned
			got := slices.DeleteFunc(slices.Clone(unsigned), func(f string) bool { return first[f] == "" && !open[f] })
			if !slices.Equal(got, want) {
				t.Errorf("Unsigned = %v (set fields %v); an attacker can change %v", unsigned, got, want)
			}
		})
	}
}

// Every preset keeps a result longer than it accepts a signed timestamp, so a
// delivery replayed after its result expired is too old to verify; and a
// tolerance override as long as the retention is refused.
func TestEveryRetentionExceedsItsTolerance(t *testing.T) {
	for _, name := range webhook.Names() {
		p, _ := preset.Lookup(name)
		if p.ResultTTL <= p.Tolerance {
			t.Errorf("%s: retention %s, tolerance %s", name, p.ResultTTL, p.Tolerance)
		}
		if p.Tolerance == 0 {
			continue
		}
		if _, err := webhook.New(name, []string{webhook.DevSecret(name)}, p.ResultTTL); err == nil {
			t.Errorf("%s: a tolerance of its whole retention (%s) was accepted", name, p.ResultTTL)
		}
	}
	if _, err := webhook.NewHMAC(webhook.HMACConfig{Header: "x-sig", TimestampHeader: "x-ts", Tolerance: 2 * time.Hour, ResultTTL: time.Hour}, []string{"s"}); err == nil {
		t.Error("hmac: a tolerance over the retention was accepted")
	}
}

// Every sender whose scheme signs a timestamp checks it: a delivery signed an
// hour before the receiver's clock is too old.
func TestEverySignedTimestampIsChecked(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	for _, name := range webhook.Names() {
		p, _ := preset.Lookup(name)
		if p.TimestampHeader == "" && p.TimestampField == "" && !strings.Contains(p.HeaderFormat, "{timestamp}") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			signWith, verifyWith := labelSecrets(t, name)
			v, err := webhook.New(name, []string{verifyWith}, 0)
			if err != nil {
				t.Fatal(err)
			}
			sample, err := webhooktest.Sample(name, "evt_old_1", now)
			if err != nil {
				t.Fatal(err)
			}
			sample.URL = "https://hooks.example.com/webhooks/" + name
			signed, err := webhooktest.Sign(name, signWith, sample)
			if err != nil {
				t.Fatal(err)
			}
			signed.Now = now.Add(time.Hour)
			if _, err := v.Verify(signed); !errors.Is(err, webhook.ErrTooOld) {
				t.Fatalf("signed an hour ago: %v, want ErrTooOld", err)
			}
		})
	}
}
