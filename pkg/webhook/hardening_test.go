package webhook_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemlambda/idem/pkg/webhook"
)

// TestBodyOnlySignersKeyOnTheBodyWhateverTheHeaders: GitHub and Shopify sign
// the body only, so a captured body re-sent with another delivery id or event
// type must keep its key, and only a different signed body may change it.
func TestBodyOnlySignersKeyOnTheBodyWhateverTheHeaders(t *testing.T) {
	for provider, fixture := range map[string]string{
		"github":  "events/github_push.json",
		"shopify": "events/shopify_orders_create.json",
	} {
		t.Run(provider, func(t *testing.T) {
			p := mustNew(t, provider, testSecrets[provider][0])
			body := readFixture(t, fixture)
			first, err := p.Event(unsignedHeaders(p, "original-1", "genuine"), body)
			if err != nil {
				t.Fatal(err)
			}
			if first.ID != bodyDigest(body) || !strings.HasPrefix(first.ID, "sha256:") {
				t.Fatalf("ID %q is not the body digest", first.ID)
			}
			if want := []string{"delivery_id", "type"}; !slices.Equal(first.Unsigned, want) {
				t.Fatalf("Unsigned = %v, want %v", first.Unsigned, want)
			}
			for i := range 5 {
				ev, err := p.Event(unsignedHeaders(p, fmt.Sprintf("replay-%d", i), "attacker/type"), body)
				if err != nil {
					t.Fatal(err)
				}
				if ev.ID != first.ID {
					t.Fatalf("re-sent with new headers: ID %q, first %q", ev.ID, first.ID)
				}
				if ev.DeliveryID != fmt.Sprintf("replay-%d", i) || ev.Type != "attacker/type" {
					t.Fatalf("unsigned fields not reported as received: %+v", ev)
				}
			}
			trimmed := bytes.TrimSpace(body)
			other := append(bytes.Clone(trimmed[:len(trimmed)-1]), ' ', '}')
			if ev, err := p.Event(unsignedHeaders(p, "original-1", "genuine"), other); err != nil || ev.ID == first.ID {
				t.Fatalf("another body under the same delivery id: %+v, %v", ev, err)
			}
		})
	}
}

// unsignedHeaders sets every unsigned header p's preset reads: the delivery
// id (under each of its names) and the event type.
func unsignedHeaders(p provider, delivery, typ string) map[string]string {
	preset := p.v.Preset()
	h := map[string]string{"content-type": "application/json", preset.EventType.Header: typ}
	for _, name := range preset.DeliveryIDHeaders {
		h[name] = delivery
	}
	return h
}

// TestSendersThatSignTheirIDReportNothingUnsigned: Stripe, Standard Webhooks
// and Slack sign the event id, so it is the key and nothing is unsigned.
func TestSendersThatSignTheirIDReportNothingUnsigned(t *testing.T) {
	for _, name := range []string{"stripe", "standard", "slack"} {
		p := mustNew(t, name, testSecrets[name][0])
		body, extra := p.Sample("evt_signed_1", testNow)
		ev, err := p.Event(merged(extra, p.Sign(testSecrets[name][0], body, testNow)), body)
		if err != nil || ev.ID != "evt_signed_1" || ev.DeliveryID != "" || len(ev.Unsigned) != 0 {
			t.Errorf("%s: Event = %+v, %v", name, ev, err)
		}
	}
}

// TestAmbiguousEventIDIsABadPayload: an id read from the body must mean one
// thing to every JSON parser, and one key to the store.
func TestAmbiguousEventIDIsABadPayload(t *testing.T) {
	for _, tc := range []struct{ provider, member, tail string }{
		{"stripe", "id", `,"type":"charge.succeeded"}`},
		{"slack", "event_id", `,"type":"event_callback"}`},
	} {
		p := mustNew(t, tc.provider, testSecrets[tc.provider][0])
		m := tc.member
		for _, body := range []string{
			`{"` + m + `":"A","` + m + `":"B"` + tc.tail,
			`{"` + m + `":"A","type":"x","` + m + `":"A"}`,                                 // the same value twice is still named twice
			`{"` + m + `":"A","\u00` + fmt.Sprintf("%x", m[0]) + m[1:] + `":"B"` + tc.tail, // escaped name
			`{"` + m + `":"A\ud800"` + tc.tail,
			`{"` + m + `":"\udc00A"` + tc.tail,
			`{"` + m + `":"\ud800\u0041"` + tc.tail,
			`{"` + m + `":"\ud800\\udc00"` + tc.tail,
			`{"` + m + `":"A\ud83d"` + tc.tail,
			`{"` + m + `":"A` + "\xff" + `"` + tc.tail,
			`{"` + m + `":"A` + "\xed\xa0\x80" + `"` + tc.tail, // a surrogate encoded as UTF-8
			`{"type":"x","type":"y","` + m + `":"A"}`,          // any member named twice
		} {
			ev, err := p.Event(nil, []byte(body))
			if !errors.Is(err, webhook.ErrBadPayload) {
				t.Errorf("%s %s: Event = %+v, %v; want ErrBadPayload", tc.provider, body, ev, err)
			}
		}
		// Escapes that decode to valid text, and a valid pair, are fine.
		for body, want := range map[string]string{
			`{"` + m + `":"evt_\u0041\n"` + tc.tail:                 "evt_A\n",
			`{"` + m + `":"\ud83d\ude00\\u"` + tc.tail:              "\U0001F600\\u",
			`{"` + m + `":"caf\u00e9 é"` + tc.tail:                  "café é",
			`{"` + m + `":"evt_1","data":{"id":1,"id":2}` + tc.tail: "evt_1",
		} {
			ev, err := p.Event(nil, []byte(body))
			if err != nil || ev.ID != want {
				t.Errorf("%s %s: Event = %+v, %v; want id %q", tc.provider, body, ev, err, want)
			}
		}
	}
}

// TestErrorsQuoteABoundedPieceOfTheRequest: Verify's and Event's errors reach
// log lines, so no header or body can make them long.
func TestErrorsQuoteABoundedPieceOfTheRequest(t *testing.T) {
	huge := strings.Repeat("\x01\"\\", 500_000/3)
	body := []byte(`{"id":"evt_1"}`)
	for _, tc := range []struct {
		provider string
		headers  map[string]string
		body     []byte
	}{
		{"stripe", map[string]string{"stripe-signature": "t=1," + huge}, body},
		{"stripe", map[string]string{"stripe-signature": huge + ",t=1"}, body},
		{"stripe", map[string]string{"stripe-signature": "t=1,v1=" + huge}, body},
		{"standard", map[string]string{"webhook-id": huge, "webhook-timestamp": huge, "webhook-signature": huge}, body},
		{"slack", map[string]string{"x-slack-signature": "v0=" + huge, "x-slack-request-timestamp": huge}, body},
		{"github", map[string]string{"x-hub-signature-256": "sha256=" + huge}, body},
		{"shopify", map[string]string{"x-shopify-hmac-sha256": huge}, body},
	} {
		p := mustNew(t, tc.provider, testSecrets[tc.provider][0])
		err := p.CheckSignature(tc.headers, tc.body, testNow)
		if err == nil || len(err.Error()) > 1024 {
			t.Errorf("%s: Verify error of %d bytes: %.300s", tc.provider, len(err.Error()), err)
		}
	}
	for _, tc := range []struct {
		provider string
		headers  map[string]string
		body     string
	}{
		{"slack", nil, `{"type":"` + strings.Repeat("\\u0001", 100_000) + `"}`},
		{"stripe", nil, `{"id":` + strings.Repeat("[", 100_000)},
		{"github", map[string]string{"content-type": "application/x-www-form-urlencoded"}, "payload=%" + strings.Repeat("zz", 100_000)},
	} {
		p := mustNew(t, tc.provider, testSecrets[tc.provider][0])
		_, err := p.Event(tc.headers, []byte(tc.body))
		if err == nil || len(err.Error()) > 1024 || !utf8.ValidString(err.Error()) {
			t.Errorf("%s: Event error of %d bytes: %.300q", tc.provider, len(err.Error()), err)
		}
	}
}
