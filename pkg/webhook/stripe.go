package webhook

import (
	"crypto/hmac"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Stripe signs each delivery in the Stripe-Signature header:
//
//	stripe-signature: t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=...
//
// t is the Unix time of signing, each v1 an HMAC-SHA256 (hex) keyed with the
// endpoint's signing secret (the whole "whsec_..." string, not decoded) over
// "<t>.<body>". While a secret is being rolled, one v1 per live secret is sent;
// any v1 matching any accepted secret passes. A v1 that is not a hex
// HMAC-SHA256 is a non-match, as in Stripe's own libraries; v0 and unknown
// elements are ignored. The event id in the body, signed, is the
// deduplication key.
const (
	// StripeSignatureHeader is the header carrying Stripe's signature.
	StripeSignatureHeader = "stripe-signature"
	// StripeResultTTL is how long a completed Stripe result is kept: Stripe
	// retries a failed delivery for up to three days.
	StripeResultTTL = 96 * time.Hour
)

// StripeSignature returns the stripe-signature header value Stripe sends with
// body signed with secret at t: "t=<unix>,v1=<hex HMAC-SHA256 of t.body>".
// It matches stripe-go's webhook.GenerateTestSignedPayload.
func StripeSignature(secret string, body []byte, t time.Time) string {
	ts := unixString(t)
	mac := hmacSHA256([]byte(secret), []byte(ts), []byte("."), body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac)
}

type stripeProvider struct {
	secrets   [][]byte
	tolerance time.Duration
}

func newStripe(c config) (Provider, error) {
	p := &stripeProvider{tolerance: c.tolerance}
	for _, s := range c.secrets {
		p.secrets = append(p.secrets, []byte(s))
	}
	return p, nil
}

func (p *stripeProvider) Name() string { return "stripe" }

func (p *stripeProvider) DefaultResultTTL() time.Duration { return StripeResultTTL }

// stripeHeader is a parsed stripe-signature header.
type stripeHeader struct {
	timestamp  string // as signed
	signedAt   time.Time
	signatures [][]byte // v1 values
	malformed  int      // v1 values that are not a hex HMAC-SHA256, skipped
}

// parseStripeSignature parses a stripe-signature value: comma-separated
// key=value elements, exactly one t, any number of v1, anything else ignored.
// A v1 that is not a hex HMAC-SHA256 is counted and skipped.
func parseStripeSignature(v string) (stripeHeader, error) {
	var h stripeHeader
	if v == "" {
		return h, fmt.Errorf("%w: no %s header", ErrNotSigned, StripeSignatureHeader)
	}
	for element := range strings.SplitSeq(v, ",") {
		key, value, ok := strings.Cut(element, "=")
		if !ok || key == "" {
			return h, fmt.Errorf("%w: %s element %s is not key=value", ErrInvalidHeader, StripeSignatureHeader, quote(element))
		}
		switch key {
		case "t":
			if h.timestamp != "" {
				return h, fmt.Errorf("%w: %s has more than one t", ErrInvalidHeader, StripeSignatureHeader)
			}
			at, ok := parseTimestamp(value)
			if !ok {
				return h, fmt.Errorf("%w: %s t is not a Unix time", ErrInvalidHeader, StripeSignatureHeader)
			}
			h.timestamp, h.signedAt = value, at
		case "v1":
			// A v1 that is not a hex HMAC-SHA256 can match nothing; it is skipped,
			// as stripe-go ("Ignore invalid signatures") and stripe-node do, so a
			// valid v1 beside it still verifies.
			if sig, ok := decodeHexMAC(value); ok {
				h.signatures = append(h.signatures, sig)
			} else {
				h.malformed++
			}
		}
	}
	if h.timestamp == "" {
		return h, fmt.Errorf("%w: %s has no t", ErrInvalidHeader, StripeSignatureHeader)
	}
	return h, nil
}

// Verify checks stripe-signature: the timestamp within tolerance, then any v1
// against every secret.
func (p *stripeProvider) Verify(headers map[string]string, body []byte, now time.Time) error {
	h, err := parseStripeSignature(header(headers, StripeSignatureHeader))
	if err != nil {
		return err
	}
	if len(h.signatures) == 0 {
		return fmt.Errorf("%w: %s has no well-formed v1 signature (%d malformed)", ErrNoValidSignature, StripeSignatureHeader, h.malformed)
	}
	if err := checkTolerance(h.signedAt, now, p.tolerance); err != nil {
		return err
	}
	for _, secret := range p.secrets {
		expected := hmacSHA256(secret, []byte(h.timestamp), []byte("."), body)
		for _, sig := range h.signatures {
			if hmac.Equal(expected, sig) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %d v1 signature(s) checked against %d secret(s)", ErrNoValidSignature, len(h.signatures), len(p.secrets))
}

// Event reads the event object: id (the deduplication key), type, and the id
// of data.object (for thin events, related_object).
func (p *stripeProvider) Event(_ map[string]string, body []byte) (Event, error) {
	obj, err := decodeObject(body)
	if err != nil {
		return Event{}, err
	}
	id, err := obj.idString("id")
	if err != nil {
		return Event{}, err
	}
	ev := Event{ID: id, Type: obj.str("type")}
	if ev.ID == "" {
		return Event{}, fmt.Errorf("%w: stripe event has no id", ErrNoEventID)
	}
	if data := obj.obj("data"); data != nil {
		if o := data.obj("object"); o != nil {
			ev.ObjectID = o.str("id")
		}
	}
	if ev.ObjectID == "" {
		if related := obj.obj("related_object"); related != nil {
			ev.ObjectID = related.str("id")
		}
	}
	return ev, nil
}

func (p *stripeProvider) Sign(secret string, body []byte, now time.Time) map[string]string {
	return map[string]string{StripeSignatureHeader: StripeSignature(secret, body, now)}
}

// stripeAPIVersion is the API version samples claim: stripe-go v82's.
const stripeAPIVersion = "2025-08-27.basil"

// Sample is a payment_intent.succeeded event, pretty-printed as Stripe sends it.
func (p *stripeProvider) Sample(eventID string, now time.Time) ([]byte, map[string]string) {
	created := now.Unix()
	intent := derivedID("pi_3Q", eventID, 20)
	body := map[string]any{
		"id":          eventID,
		"object":      "event",
		"api_version": stripeAPIVersion,
		"created":     created,
		"data": map[string]any{
			"object": map[string]any{
				"id":                   intent,
				"object":               "payment_intent",
				"amount":               2000,
				"amount_received":      2000,
				"currency":             "usd",
				"status":               "succeeded",
				"capture_method":       "automatic",
				"client_secret":        intent + "_secret_" + derivedID("", "secret"+eventID, 24),
				"created":              created - 3,
				"latest_charge":        derivedID("ch_3Q", eventID, 20),
				"livemode":             false,
				"metadata":             map[string]any{"order_id": derivedID("ord_", eventID, 12)},
				"payment_method":       derivedID("pm_1Q", eventID, 20),
				"payment_method_types": []string{"card"},
			},
		},
		"livemode":         false,
		"pending_webhooks": 1,
		"request": map[string]any{
			"id":              derivedID("req_", eventID, 14),
			"idempotency_key": derivedID("", "key"+eventID, 32),
		},
		"type": "payment_intent.succeeded",
	}
	return mustJSON(body, true), map[string]string{
		"content-type": "application/json; charset=utf-8",
		"user-agent":   "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
		"accept":       "*/*; q=0.5, application/xml",
	}
}
