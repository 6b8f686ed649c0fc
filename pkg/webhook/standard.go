package webhook

import (
	"crypto/hmac"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// Standard Webhooks (https://www.standardwebhooks.com), as Svix sends them,
// sign each delivery with three headers:
//
//	webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek
//	webhook-timestamp: 1614265330
//	webhook-signature: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,...
//
// Each v1 entry of the space-separated signature list is the standard base64
// HMAC-SHA256 of "<id>.<timestamp>.<body>", keyed with the bytes the secret
// "whsec_<base64>" encodes. Other versions (v1a, asymmetric) are ignored. The
// message id is the deduplication key; a retry keeps it. Svix-branded
// deliveries name the same headers svix-id, svix-timestamp and
// svix-signature; they are accepted when the webhook-* set is incomplete.
const (
	// StandardIDHeader carries the message id, signed and the deduplication key.
	StandardIDHeader = "webhook-id"
	// StandardTimestampHeader carries the Unix time of signing.
	StandardTimestampHeader = "webhook-timestamp"
	// StandardSignatureHeader carries the space-separated signature list.
	StandardSignatureHeader = "webhook-signature"
	// StandardSecretPrefix precedes the base64 key in a signing secret.
	StandardSecretPrefix = "whsec_"
	// StandardResultTTL is how long a completed Standard Webhooks result is
	// kept: Svix's retry schedule ends about 28 hours after the first attempt.
	StandardResultTTL = 48 * time.Hour
)

// standardHeaderSet names one spelling of the three signature headers.
type standardHeaderSet struct{ id, timestamp, signature string }

var standardHeaderSets = []standardHeaderSet{
	{StandardIDHeader, StandardTimestampHeader, StandardSignatureHeader},
	{"svix-id", "svix-timestamp", "svix-signature"},
}

// DecodeStandardSecret returns the HMAC key a Standard Webhooks secret
// encodes: the base64 after the optional "whsec_" prefix, padded or not, as
// the reference libraries accept it. It returns an error wrapping
// ErrInvalidSecret when that is not base64 or encodes nothing.
func DecodeStandardSecret(secret string) ([]byte, error) {
	encoded := strings.TrimPrefix(secret, StandardSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(encoded)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: a Standard Webhooks secret is %s<base64>: %v", ErrInvalidSecret, StandardSecretPrefix, err)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: a Standard Webhooks secret encodes an empty key", ErrInvalidSecret)
	}
	return key, nil
}

// StandardSecret formats key as a Standard Webhooks signing secret,
// "whsec_<base64>".
func StandardSecret(key []byte) string {
	return StandardSecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// StandardSignature returns the webhook-signature header value a Standard
// Webhooks sender attaches to message msgID with body, signed with secret at
// t: "v1,<base64 HMAC-SHA256 of msgID.t.body>". It fails, wrapping
// ErrInvalidSecret, only when secret does not decode.
func StandardSignature(secret, msgID string, body []byte, t time.Time) (string, error) {
	key, err := DecodeStandardSecret(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(standardMAC(key, msgID, unixString(t), body)), nil
}

// standardMAC is HMAC-SHA256(key, "id.timestamp.body").
func standardMAC(key []byte, msgID, timestamp string, body []byte) []byte {
	return hmacSHA256(key, []byte(msgID), []byte("."), []byte(timestamp), []byte("."), body)
}

type standardProvider struct {
	keys      [][]byte
	tolerance time.Duration
}

func newStandard(c config) (Provider, error) {
	p := &standardProvider{tolerance: c.tolerance}
	for i, s := range c.secrets {
		key, err := DecodeStandardSecret(s)
		if err != nil {
			return nil, fmt.Errorf("standard secret %d: %w", i+1, err)
		}
		p.keys = append(p.keys, key)
	}
	return p, nil
}

func (p *standardProvider) Name() string { return "standard" }

func (p *standardProvider) DefaultResultTTL() time.Duration { return StandardResultTTL }

// standardHeaders returns the first complete set of id, timestamp and
// signature headers, webhook-* before svix-*.
func standardHeaders(headers map[string]string) (id, timestamp, signature string, err error) {
	for _, set := range standardHeaderSets {
		id, timestamp, signature = header(headers, set.id), header(headers, set.timestamp), header(headers, set.signature)
		if id != "" && timestamp != "" && signature != "" {
			return id, timestamp, signature, nil
		}
	}
	return "", "", "", fmt.Errorf("%w: %s, %s and %s are all required", ErrNotSigned, StandardIDHeader, StandardTimestampHeader, StandardSignatureHeader)
}

// parseStandardSignatures parses a webhook-signature list: space-separated
// "<version>,<signature>" entries. It returns the v1 signatures and the
// number of entries that are malformed (no comma, or a v1 that is not a
// base64 HMAC-SHA256). A malformed entry is a non-match, not an error, as in
// the reference libraries (github.com/standard-webhooks/standard-webhooks,
// libraries/go/webhook.go and libraries/javascript/src/index.ts skip or fail
// to match such an entry and go on to the next); other versions are skipped.
func parseStandardSignatures(v string) (sigs [][]byte, malformed int) {
	for entry := range strings.SplitSeq(v, " ") {
		if entry == "" {
			continue
		}
		version, value, ok := strings.Cut(entry, ",")
		switch {
		case !ok || version == "":
			malformed++
		case version != "v1":
		default:
			if sig, ok := decodeBase64MAC(value); ok {
				sigs = append(sigs, sig)
			} else {
				malformed++
			}
		}
	}
	return sigs, malformed
}

// Verify checks the signature headers: the timestamp within tolerance, then
// any v1 entry against every secret.
func (p *standardProvider) Verify(headers map[string]string, body []byte, now time.Time) error {
	id, timestamp, signature, err := standardHeaders(headers)
	if err != nil {
		return err
	}
	signedAt, ok := parseTimestamp(timestamp)
	if !ok {
		return fmt.Errorf("%w: %s is not a Unix time", ErrInvalidHeader, StandardTimestampHeader)
	}
	sigs, malformed := parseStandardSignatures(signature)
	if len(sigs) == 0 {
		return fmt.Errorf("%w: %s has no well-formed v1 entry (%d malformed)", ErrNoValidSignature, StandardSignatureHeader, malformed)
	}
	if err := checkTolerance(signedAt, now, p.tolerance); err != nil {
		return err
	}
	for _, key := range p.keys {
		expected := standardMAC(key, id, timestamp, body)
		for _, sig := range sigs {
			if hmac.Equal(expected, sig) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %d v1 signature(s) checked against %d secret(s)", ErrNoValidSignature, len(sigs), len(p.keys))
}

// Event takes the message id from the signed headers, and the type (and
// data.id, when there is one) from the JSON body.
func (p *standardProvider) Event(headers map[string]string, body []byte) (Event, error) {
	obj, err := decodeObject(body)
	if err != nil {
		return Event{}, err
	}
	id, _, _, err := standardHeaders(headers)
	if err != nil {
		// Not a signed set; take whichever id header there is.
		id = header(headers, StandardIDHeader)
		if id == "" {
			id = header(headers, standardHeaderSets[1].id)
		}
	}
	if id == "" {
		return Event{}, fmt.Errorf("%w: no %s header", ErrNoEventID, StandardIDHeader)
	}
	ev := Event{ID: id, Type: obj.str("type")}
	if data := obj.obj("data"); data != nil {
		ev.ObjectID = data.id("id")
	}
	return ev, nil
}

// Sign returns all three headers, since the message id is signed. The id is
// the body's top-level "id" string when it has one (Sample's bodies do),
// else one derived from the body, so signing the same body again, as a retry
// does, keeps it. It returns nil if secret is not a Standard Webhooks secret.
func (p *standardProvider) Sign(secret string, body []byte, now time.Time) map[string]string {
	msgID := ""
	if obj, err := decodeObject(body); err == nil {
		msgID = obj.str("id")
	}
	if msgID == "" {
		msgID = derivedID("msg_", string(body), 27)
	}
	sig, err := StandardSignature(secret, msgID, body, now)
	if err != nil {
		return nil
	}
	return map[string]string{
		StandardIDHeader:        msgID,
		StandardTimestampHeader: unixString(now),
		StandardSignatureHeader: sig,
	}
}

// Sample is an invoice.paid message in the Standard Webhooks payload shape
// (type, timestamp, data); it repeats eventID as the top-level id so that
// Sign signs it under that message id.
func (p *standardProvider) Sample(eventID string, now time.Time) ([]byte, map[string]string) {
	body := map[string]any{
		"id":        eventID,
		"type":      "invoice.paid",
		"timestamp": now.UTC().Format("2006-01-02T15:04:05.000000Z"),
		"data": map[string]any{
			"id":          derivedID("inv_", eventID, 24),
			"customer_id": derivedID("cus_", eventID, 14),
			"amount":      4900,
			"currency":    "eur",
			"status":      "paid",
		},
	}
	return mustJSON(body, false), map[string]string{
		"content-type":   "application/json",
		"user-agent":     "Svix-Webhooks/1.44.0",
		StandardIDHeader: eventID,
	}
}
