// Package webhook verifies the signatures of webhook deliveries and returns,
// in the same step, what deduplication needs from them, for every supported
// sender.
//
// A sender is a preset: how it signs (an HMAC over the body, over a
// timestamp and the body, over a message id, over the URL it posted to; a
// public-key signature; a shared token; a signature inside the body), where
// its event id and type come from, how long results must be kept and its
// endpoint handshake. Names lists them. A sender of the HMAC families that
// has no preset is described with an HMACConfig.
//
// It knows nothing of HTTP servers, Redis or AWS: a caller hands Verify a
// Request (raw body, headers as net/http holds them, the public URL for
// URL-signing senders) and gets back either an error wrapping one of the
// sentinels below or the verified Delivery, whose ID is the deduplication
// key. There is no way to read a delivery without verifying it. A typical
// request path:
//
//	v, err := webhook.New("stripe", secrets, 0) // once, at init
//	...
//	d, err := v.Verify(webhook.Request{Header: r.Header, Body: body})
//	switch {
//	case errors.Is(err, webhook.ErrBadPayload), errors.Is(err, webhook.ErrNoEventID):
//		// 400: signed, but not an event this sender sends
//	case err != nil:
//		// 401: not signed, or not by this sender
//	case d.Handshake != nil:
//		// endpoint validation: answer with it, no deduplication
//	}
//
// The signing side lives in package webhooktest, beside this one as
// net/http/httptest sits beside net/http.
package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idemlambda/idem/internal/preset"
)

// DefaultTolerance is how far a signed timestamp may lie from the receiver's
// clock, in either direction, before a delivery is rejected. It is the window
// Stripe, Slack and Standard Webhooks document, and the configurable
// verifier's default.
const DefaultTolerance = preset.DefaultTolerance

// Errors returned by this package. Callers branch on them with errors.Is; the
// returned errors wrap them with detail that never includes a secret or a
// computed signature.
var (
	// ErrUnknownProvider is returned by New for a name Names does not list.
	ErrUnknownProvider = errors.New("webhook: unknown provider")
	// ErrNoSecret is returned by New when it is given no secret, or an empty one.
	ErrNoSecret = errors.New("webhook: no secret")
	// ErrInvalidSecret is returned by New for a secret the provider's scheme
	// cannot use (a Standard Webhooks secret that is not base64).
	ErrInvalidSecret = errors.New("webhook: invalid secret")
	// ErrInvalidTolerance is returned by New for a negative tolerance.
	ErrInvalidTolerance = errors.New("webhook: invalid tolerance")

	// ErrNotSigned means a header the scheme requires is missing or empty.
	ErrNotSigned = errors.New("webhook: not signed")
	// ErrInvalidHeader means a signature or timestamp header is malformed.
	ErrInvalidHeader = errors.New("webhook: invalid signature header")
	// ErrNoValidSignature means no signature in the headers matches the body
	// under any accepted secret.
	ErrNoValidSignature = errors.New("webhook: no valid signature")
	// ErrTooOld means the signed timestamp is further in the past than the
	// tolerance allows: a replay, or a delivery held back too long.
	ErrTooOld = errors.New("webhook: timestamp too old")
	// ErrTooNew means the signed timestamp is further in the future than the
	// tolerance allows.
	ErrTooNew = errors.New("webhook: timestamp too new")
	// ErrNoPublicURL means a URL-signing sender's delivery came without the
	// public URL it was posted to (Request.URL).
	ErrNoPublicURL = errors.New("webhook: no public URL for a URL-signing scheme")

	// ErrNoEventID means a verified delivery carries no deduplication key.
	ErrNoEventID = errors.New("webhook: no event id")
	// ErrBadPayload means the signed body is not the JSON the sender sends,
	// or is ambiguous (a member named twice), or is no JSON document at all.
	ErrBadPayload = errors.New("webhook: bad payload")
)

// Request is one delivery as a Verifier sees it.
type Request struct {
	// Header holds the request headers with canonical names, as net/http
	// gives them; of a repeated header, the first value is read.
	Header http.Header
	// Body is the raw body, exactly as received.
	Body []byte
	// URL is the public URL the sender posted to, query string included, as
	// pasted into the sender's settings. Only URL-signing senders (Twilio,
	// Square, HubSpot) need it.
	URL string
	// Method is the HTTP method; empty means POST.
	Method string
	// Now is the receiver's clock, for the timestamp tolerance; the zero
	// time means time.Now().
	Now time.Time
}

// Handshake is the response to an endpoint-validation request: the caller
// answers 200 with it and neither deduplicates nor forwards anything.
type Handshake struct {
	// Kind names the exchange answered: "url_verification" (Slack),
	// "app_rate_limited" (Slack's notice), "discord-ping",
	// "zoom-url-validation", "twitch-challenge", "intercom-ping",
	// "woocommerce-ping".
	Kind string
	// ContentType is the response's media type.
	ContentType string
	// Body is the response body, exactly as the sender expects it.
	Body []byte
}

// Delivery is a verified delivery: what deduplication, routing and the sink
// need from it.
type Delivery struct {
	// ID is the deduplication key, the same for every retry of one event:
	// the signed event id, or "sha256:" and the hex SHA-256 of the signed
	// content when the sender's own id is unsigned, so that no header an
	// attacker can change makes a captured delivery look new.
	ID string
	// DeliveryID is the sender's own id for the delivery when the signature
	// does not cover it (GitHub's x-github-delivery); empty otherwise.
	DeliveryID string
	// Type is the event type; it may be empty.
	Type string
	// ObjectID identifies the object the event is about, when the delivery
	// says so (it suits SQS FIFO message groups); it may be empty.
	ObjectID string
	// Unsigned names what the signature does not cover, among "id",
	// "delivery_id", "type", "object_id" and "payload": exactly what the
	// sender's MAC leaves out (GitLab's token binds no bytes, so all of
	// them; Mailgun signs its timestamp and token only, so all but the id
	// taken from the token). A consumer must not rely on them for anything
	// the signed part does not confirm. Every other of those it has is
	// signed.
	Unsigned []string
	// Handshake is set for an endpoint-validation request: the caller
	// answers with it and neither deduplicates nor forwards anything; the
	// other fields are then empty.
	Handshake *Handshake
	// Payload is the JSON document the sink receives: the body, the JSON of
	// a form's payload field (GitHub), a JSON object of the parameters of
	// another form body (Twilio), or the body without the sender's
	// signature material (Mailgun's signature object).
	Payload []byte
	// Fingerprint is the SHA-256 of what identifies the event's content, so
	// that a retry of one event matches and another event under the same id
	// does not: the body, or the members of it that describe the event and
	// not the delivery (Stripe's, without pending_webhooks).
	Fingerprint [32]byte
	// Items holds, for a sender that puts several events in one delivery
	// (Adyen's notification items), one Delivery per event, each verified on
	// its own and deduplicated by its own ID; the fields above are then
	// empty. The caller answers with Answer once every item is accepted.
	Items []Delivery
	// Answer is the response the sender expects once every item of Items is
	// accepted (Adyen's "[accepted]", text/plain).
	Answer *Handshake
}

// New returns a verifier for the sender called name (Names), accepting a
// delivery signed with any of secrets (several at once during a rotation).
// For a public-key sender a secret is its public key (Discord: hex Ed25519;
// SendGrid: base64 DER). tolerance, when positive, overrides the sender's
// window for a signed timestamp. Errors wrap ErrUnknownProvider, ErrNoSecret,
// ErrInvalidSecret or ErrInvalidTolerance. The configurable verifier is built
// with NewHMAC.
func New(name string, secrets []string, tolerance time.Duration) (*Verifier, error) {
	p, ok := preset.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownProvider, name, strings.Join(Names(), ", "))
	}
	return newVerifier(p, secrets, tolerance)
}

// Names lists the senders New knows, sorted. "hmac", the configurable
// verifier's name (NewHMAC), is not among them.
func Names() []string { return preset.Names() }

// DevSecret returns the public development secret of the sender called name
// (or "hmac"), as a verifier is configured with it: the bytes
// "dev-<name>-secret", written as the sender writes its secrets (Standard
// Webhooks: "whsec_" and their base64), or for a public-key sender the public
// key of a private key derived from them (webhooktest.DevSigningSecret).
// It is deterministic, so local tools can sign with it; a deployment must
// never accept it.
func DevSecret(name string) string { return preset.DevSecret(name) }
