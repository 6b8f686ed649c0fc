package webhooktest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/pkg/webhook"
)

// The header values of the original five senders, written out the way each
// sender's documentation and SDK write them, so tests can compare them with
// the SDKs' own signing helpers.

// StripeSignature returns the stripe-signature header value Stripe sends with
// body signed with secret at t: "t=<unix>,v1=<hex HMAC-SHA256 of t.body>".
// It matches stripe-go's webhook.GenerateTestSignedPayload.
func StripeSignature(secret string, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(hmacSHA256([]byte(secret), []byte(ts+"."), body))
}

// GitHubSignature returns the x-hub-signature-256 header value GitHub sends
// with body signed with secret: "sha256=<hex HMAC-SHA256 of body>".
func GitHubSignature(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(hmacSHA256([]byte(secret), body))
}

// ShopifyHMAC returns the x-shopify-hmac-sha256 header value Shopify sends
// with body signed with secret: base64 of HMAC-SHA256(secret, body).
func ShopifyHMAC(secret string, body []byte) string {
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), body))
}

// SlackSignature returns the x-slack-signature header value Slack sends with
// body signed with secret at t: "v0=<hex HMAC-SHA256 of v0:t:body>". The
// matching x-slack-request-timestamp is t in Unix seconds.
func SlackSignature(secret string, body []byte, t time.Time) string {
	return "v0=" + hex.EncodeToString(hmacSHA256([]byte(secret), []byte("v0:"+strconv.FormatInt(t.Unix(), 10)+":"), body))
}

// StandardSignature returns the webhook-signature header value a Standard
// Webhooks sender attaches to message msgID with body, signed with secret at
// t: "v1,<base64 HMAC-SHA256 of msgID.t.body>". It fails, wrapping
// webhook.ErrInvalidSecret, only when secret does not decode.
func StandardSignature(secret, msgID string, body []byte, t time.Time) (string, error) {
	key, err := preset.DecodeWhsec(secret)
	if err != nil {
		return "", fmt.Errorf("%w: %w", webhook.ErrInvalidSecret, err)
	}
	sig := hmacSHA256(key, []byte(msgID+"."+strconv.FormatInt(t.Unix(), 10)+"."), body)
	return "v1," + base64.StdEncoding.EncodeToString(sig), nil
}

// hmacSHA256 returns HMAC-SHA256(key, parts joined without separator).
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	return mac(preset.SHA256, key, bytes.Join(parts, nil))
}
