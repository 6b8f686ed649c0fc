package webhook

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Family is one way of signing a webhook delivery. Almost every sender signs
// in one of a few ways; a Preset names the family and fills in its details
// (header names, encoding, signed-content layout), so a sender of a known
// family is a row in the preset table, not code.
type Family string

// The signing families. The four HMAC families share one engine, driven by
// the preset's Layout; they are named apart because each needs different
// pieces (a timestamp, a message id, the public URL).
const (
	// FamilyBodyHMAC is an HMAC over the raw body, in hex or base64,
	// sometimes behind a prefix ("sha256="): Intercom, Bitbucket, Razorpay,
	// WooCommerce, Linear, Typeform, Coinbase Commerce.
	FamilyBodyHMAC Family = "body-hmac"
	// FamilyTimestampHMAC is an HMAC over a timestamp and the body, the
	// timestamp in the signature header ("t=...,v1=...") or in its own
	// header: Paddle, Calendly, Zoom.
	FamilyTimestampHMAC Family = "timestamp-hmac"
	// FamilyMessageHMAC is an HMAC over a message id, a timestamp and the
	// body: Twitch EventSub, Standard Webhooks.
	FamilyMessageHMAC Family = "message-hmac"
	// FamilyURLHMAC is an HMAC over the public URL the sender posted to,
	// followed by the sorted form parameters or the body: Twilio, Square,
	// HubSpot v3.
	FamilyURLHMAC Family = "url-hmac"
	// FamilyPublicKey is a public-key signature over a timestamp and the
	// body: Discord (Ed25519), SendGrid (ECDSA P-256).
	FamilyPublicKey Family = "public-key"
	// FamilyToken is a shared token sent as is in a header (GitLab). It
	// authenticates the sender but binds nothing of the delivery.
	FamilyToken Family = "token"
	// FamilyBodySignature carries the signature inside the JSON body, over
	// fields of that body (Mailgun: timestamp and token).
	FamilyBodySignature Family = "body-signature"
	// FamilyItemHMAC is a body of several events, each with its own HMAC
	// over named fields of the event, inside the event (Adyen's
	// notificationItems). Each event is verified, and deduplicated, on its
	// own: Event returns them in Delivery.Items.
	FamilyItemHMAC Family = "item-hmac"
)

// Algorithm is the MAC or signature algorithm of a preset.
type Algorithm string

// The algorithms.
const (
	SHA1   Algorithm = "sha1"   // HMAC-SHA1
	SHA256 Algorithm = "sha256" // HMAC-SHA256
	SHA512 Algorithm = "sha512" // HMAC-SHA512
	// Ed25519 verifies an Ed25519 signature (hex) with a hex public key.
	Ed25519 Algorithm = "ed25519"
	// ECDSAP256 verifies an ASN.1 DER ECDSA P-256 signature over the SHA-256
	// of the content (base64) with a base64 DER SubjectPublicKeyInfo key.
	ECDSAP256 Algorithm = "ecdsa-p256-sha256"
)

// Encoding is how a signature is written in its header.
type Encoding string

// The encodings.
const (
	Hex    Encoding = "hex"    // either case
	Base64 Encoding = "base64" // standard alphabet, padded
)

// TimestampFormat is how a signed timestamp is written.
type TimestampFormat string

// The timestamp formats.
const (
	UnixSeconds      TimestampFormat = "unix"    // decimal seconds (the default)
	UnixMilliseconds TimestampFormat = "unix-ms" // decimal milliseconds
	RFC3339          TimestampFormat = "rfc3339" // 2006-01-02T15:04:05.999999999Z07:00
)

// SecretFormat is how a configured secret becomes the HMAC key.
type SecretFormat string

// The secret formats.
const (
	// SecretRaw uses the secret's bytes as the key (the default).
	SecretRaw SecretFormat = ""
	// SecretWhsec decodes the base64 after an optional "whsec_" prefix, as
	// Standard Webhooks secrets are written.
	SecretWhsec SecretFormat = "whsec"
	// SecretHTMLSpecialChars decodes &amp; &quot; &#039; &lt; &gt; in the
	// secret first, as WooCommerce does (wp_specialchars_decode) with the
	// secret it stored.
	SecretHTMLSpecialChars SecretFormat = "html-specialchars"
)

// HandshakeKind names a sender's endpoint-validation exchange, answered by
// the receiver and never forwarded as an event.
type HandshakeKind string

// The handshakes.
const (
	// HandshakeNone: the sender validates no endpoint.
	HandshakeNone HandshakeKind = ""
	// HandshakeDiscordPing answers an interaction of type 1 (PING) with
	// {"type":1}.
	HandshakeDiscordPing HandshakeKind = "discord-ping"
	// HandshakeZoomURLValidation answers an endpoint.url_validation event
	// with {"plainToken": p, "encryptedToken": hex HMAC-SHA256(secret, p)}.
	HandshakeZoomURLValidation HandshakeKind = "zoom-url-validation"
	// HandshakeTwitchChallenge answers a webhook_callback_verification
	// message with its challenge, as text/plain.
	HandshakeTwitchChallenge HandshakeKind = "twitch-challenge"
	// HandshakeSlackURLVerification answers a url_verification request
	// (body type "url_verification") with {"challenge": <its challenge>}.
	HandshakeSlackURLVerification HandshakeKind = "url_verification"
	// HandshakeWooCommercePing answers WooCommerce's ping, sent unsigned
	// when a webhook is saved (body "webhook_id=<n>", no signature header),
	// with an empty 200: WooCommerce requires it. It is the one unsigned
	// request a verifier lets through, and it does nothing.
	HandshakeWooCommercePing HandshakeKind = "woocommerce-ping"
)

// Source says where a value of a delivery comes from.
//
// Field is a dotted path into the JSON body ("data.id"); several paths,
// comma-separated, are joined with "|" (a composite id). Header is a header
// name. With both empty, an event id is a digest of the signed content (see
// Preset.EventID); an event type is then empty.
type Source struct {
	Field  string
	Header string
	// Text makes a Field that is not a JSON string count as absent (Stripe's
	// and Slack's type); otherwise a number is read as its digits.
	Text bool
}

// Preset is one sender's way of signing and of naming its events. Its
// fields are exported so that tests and tools (package webhooktest) can sign
// exactly as the sender does.
type Preset struct {
	// Name is the registry name ("twilio", "discord", ...).
	Name string
	// Family is the signing family.
	Family Family
	// SignatureHeader carries the signature, or the token of FamilyToken.
	// FamilyBodySignature has none.
	SignatureHeader string
	// HeaderFormat is the layout of SignatureHeader's value: empty for the
	// bare signature (behind Prefix), or "<tkey>={timestamp}<sep><skey>={signature}"
	// for a keyed list such as "t={timestamp},v1={signature}" (Calendly) or
	// "ts={timestamp};h1={signature}" (Paddle). In a keyed list, any number
	// of signature entries may appear (one per live secret during a
	// rotation), unknown keys are ignored and a malformed signature entry is
	// a non-match, as the senders' SDKs treat them.
	HeaderFormat string
	// Prefix precedes a bare signature ("sha256=", "v0=").
	Prefix string
	// Algorithm is the MAC or signature algorithm.
	Algorithm Algorithm
	// Encoding is how the signature is written.
	Encoding Encoding
	// SecretFormat is how a configured secret becomes the HMAC key.
	SecretFormat SecretFormat
	// TimestampHeader carries the signed timestamp when HeaderFormat does
	// not; TimestampField is its JSON path when it travels in the body.
	TimestampHeader string
	TimestampField  string
	// TimestampFormat is how the timestamp is written (default Unix seconds).
	TimestampFormat TimestampFormat
	// IDHeader carries the message id that the {id} placeholder of Layout
	// stands for.
	IDHeader string
	// TokenField and SignatureField locate, for FamilyBodySignature, the
	// signed token and the signature in the JSON body.
	TokenField     string
	SignatureField string
	// BodyHashParam names the query parameter that carries the hex SHA-256
	// of a JSON body when the URL, not the body, is signed (Twilio's
	// bodySHA256).
	BodyHashParam string
	// URLDecodeReserved makes the signed URL the request URL with the
	// percent-encodings of : / ? @ ! $ ' ( ) * , ; decoded, as HubSpot signs
	// it.
	URLDecodeReserved bool
	// Layout is the signed content, a template of literal text and the
	// placeholders {body}, {timestamp}, {id}, {url}, {method}, {form} (the
	// form body's parameters sorted by name, each name followed by its
	// value) and {token}.
	Layout string
	// Tolerance bounds the distance between the signed timestamp and the
	// receiver's clock; 0 checks none (the sender's SDK checks none).
	Tolerance time.Duration
	// ResultTTL is how long a completed result is kept: longer than the
	// sender's last retry (Retries).
	ResultTTL time.Duration
	// Retries states the sender's retry schedule and where it is documented.
	Retries string
	// EventID is where the deduplication key comes from: a signed body
	// field, the signed IDHeader, or (both empty) "sha256:" and the hex
	// SHA-256 of the signed content rendered without its timestamp, for
	// senders whose own id is unsigned. It is always derived from signed
	// bytes.
	EventID Source
	// DigestOmits names JSON members (at any depth) left out of a digest
	// event id, for senders that re-stamp each attempt of one event
	// (Linear's webhookTimestamp, HubSpot's attemptNumber). The digest is
	// then taken over the body re-encoded without them.
	DigestOmits []string
	// EventType is where the event type comes from. A header outside the
	// signature is allowed and reported in Delivery.Unsigned.
	EventType Source
	// ObjectField is the JSON path of the object the event is about, if any.
	ObjectField string
	// Handshake is the sender's endpoint validation, if it has one.
	Handshake HandshakeKind
	// DeliveryIDHeaders name the headers carrying the sender's own delivery
	// id when the signature does not cover it (GitHub's x-github-delivery;
	// Shopify's x-shopify-webhook-id, else x-shopify-event-id): the first
	// one present becomes Delivery.DeliveryID, reported unsigned, and a
	// delivery with none of them is ErrNoEventID. It is never the key.
	DeliveryIDHeaders []string
	// HeaderAliases maps a header name to another spelling the sender may
	// use instead (Svix's svix-id for webhook-id, ...). The aliases are read
	// only when the canonical headers are incomplete and the aliased set is
	// complete.
	HeaderAliases map[string]string
	// FormPayloadField names the form field that carries the JSON document
	// of an application/x-www-form-urlencoded delivery (GitHub's payload).
	// The signature and the digest key cover the form as sent; fields and
	// the sink's payload are read from the document.
	FormPayloadField string
	// FingerprintFields are the top-level members of the JSON body that the
	// payload fingerprint covers, for a sender whose retries change a member
	// that describes the delivery rather than the event (Stripe's
	// pending_webhooks). Empty: the raw body (or, with DigestOmits, the body
	// without those members).
	FingerprintFields []string
	// AllowLegacySignatures accepts, when the current signature header is
	// absent, the older signature versions of a sender that has them
	// (HubSpot's v1 and v2 X-HubSpot-Signature). They sign no timestamp,
	// so a captured delivery can be replayed once its result has expired,
	// and they are a SHA-256 of the secret followed by the content rather
	// than an HMAC. Default false; a preset without older versions refuses it.
	AllowLegacySignatures bool

	// legacy describes the sender's older signature versions, if it has any
	// (hubspot_legacy.go).
	legacy legacyScheme
	// signatureSettingsHeader names the header in which the sender declares
	// another HMAC algorithm than Algorithm for one delivery (Twilio's
	// SharedKey signatures, twilio_sharedkey.go).
	signatureSettingsHeader string
}

// Request is one delivery as a Verifier sees it.
type Request struct {
	// Headers have lower-cased names, as API Gateway payload v2.0 gives them.
	Headers map[string]string
	// Body is the raw body, exactly as received.
	Body []byte
	// URL is the public URL the sender posted to, query string included
	// (see PublicURL). Only FamilyURLHMAC needs it.
	URL string
	// Method is the HTTP method; empty means POST.
	Method string
	// Now is the receiver's clock, for the timestamp tolerance.
	Now time.Time
}

// Handshake is the response to an endpoint-validation request: the caller
// answers 200 with it and neither deduplicates nor forwards anything.
type Handshake struct {
	// Kind is the exchange answered.
	Kind HandshakeKind
	// ContentType is the response's media type.
	ContentType string
	// Body is the response body, exactly as the sender expects it.
	Body []byte
}

// Delivery is what deduplication, routing and the sink need from a verified
// delivery.
type Delivery struct {
	// ID is the deduplication key, the same for every retry of one event and
	// always derived from signed bytes, so that no header an attacker can
	// change makes a captured delivery look new: the signed event id, or
	// BodyDigestPrefix and the hex SHA-256 of the signed content when the
	// sender's own id is unsigned.
	ID string
	// DeliveryID is the sender's own id for the delivery when the signature
	// does not cover it (Preset.DeliveryIDHeaders); empty otherwise.
	DeliveryID string
	// Type is the event type; it may be empty.
	Type string
	// ObjectID identifies the object the event is about, when the delivery
	// says so. It suits SQS FIFO message groups. It may be empty.
	ObjectID string
	// Unsigned names the fields above ("delivery_id", "type", "object_id")
	// taken from input the signature does not cover. The ID never is. A
	// consumer must not rely on them for anything the body does not confirm.
	Unsigned []string
	// Handshake is set for an endpoint-validation request: the caller
	// answers with it and neither deduplicates nor forwards anything; the
	// other fields are then empty.
	Handshake *Handshake
	// Payload is the JSON document the sink receives: the body, the JSON of
	// a form's payload field (Preset.FormPayloadField), or for another form
	// body a JSON object of its parameters.
	Payload []byte
	// Fingerprint says what the payload fingerprint covers, so that a retry
	// of one event matches and another event under the same id does not.
	Fingerprint Fingerprint
	// Items holds, for a sender that puts several events in one delivery
	// (FamilyItemHMAC), one Delivery per event, each verified on its own and
	// deduplicated by its own ID; the fields above are then empty. The
	// caller answers with Answer once every item is accepted.
	Items []Delivery
	// Answer is the response the sender expects once every item of Items is
	// accepted (Adyen's "[accepted]").
	Answer *Handshake
}

// Fingerprint is what a delivery's payload fingerprint covers: Content, or
// when Fields is set, the canonical JSON of those top-level members of
// Content. The receiver hashes it (SHA-256); the same id with another
// fingerprint is a reused id, never a replay.
type Fingerprint struct {
	Content []byte
	Fields  []string
}

// ErrNoPublicURL means a URL-signing scheme was given a request without the
// public URL it was posted to.
var ErrNoPublicURL = errors.New("webhook: no public URL for a URL-signing scheme")

// Verifier verifies one preset's deliveries against a set of secrets. It is
// safe for concurrent use.
type Verifier struct {
	preset    Preset
	layout    []layoutPart
	header    headerFormat
	tolerance time.Duration
	macSize   int      // the MAC length of the preset's algorithm, in bytes
	keys      [][]byte // HMAC keys, or tokens
	edKeys    []ed25519.PublicKey
	ecKeys    []*ecdsa.PublicKey
}

// NewVerifier returns a verifier for p accepting any of secrets (several
// during a rotation). For FamilyPublicKey a secret is the sender's public
// key (Ed25519: hex; ECDSA: base64 DER). tolerance overrides p.Tolerance when
// positive; 0 keeps it.
//
// Errors wrap ErrNoSecret, ErrInvalidSecret or ErrInvalidTolerance, or
// describe a preset that cannot work (an unknown placeholder, a family
// without its header).
func NewVerifier(p Preset, secrets []string, tolerance time.Duration) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w for %s", ErrNoSecret, p.Name)
	}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("%w for %s: secret %d is empty", ErrNoSecret, p.Name, i+1)
		}
	}
	if tolerance < 0 {
		return nil, fmt.Errorf("%w: %s is negative", ErrInvalidTolerance, tolerance)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	v := &Verifier{preset: p, tolerance: p.Tolerance, macSize: schemeHash(p.Algorithm)().Size()}
	if tolerance > 0 {
		v.tolerance = tolerance
	}
	var err error
	if p.Family != FamilyToken && p.Family != FamilyItemHMAC {
		if v.layout, err = schemeParseLayout(p.Layout); err != nil {
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
		}
	}
	if v.header, err = schemeParseHeaderFormat(p.HeaderFormat); err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	for i, s := range secrets {
		if err := v.addSecret(s); err != nil {
			return nil, fmt.Errorf("%s secret %d: %w", p.Name, i+1, err)
		}
	}
	return v, nil
}

// validate reports a preset whose fields contradict its family.
func (p Preset) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("preset %s: %s", p.Name, fmt.Sprintf(format, args...))
	}
	switch p.Family {
	case FamilyBodyHMAC, FamilyTimestampHMAC, FamilyMessageHMAC, FamilyURLHMAC:
		if !slices.Contains([]Algorithm{SHA1, SHA256, SHA512}, p.Algorithm) {
			return bad("algorithm %q is not sha1, sha256 or sha512", p.Algorithm)
		}
		if p.Encoding != Hex && p.Encoding != Base64 {
			return bad("encoding %q is not hex or base64", p.Encoding)
		}
	case FamilyPublicKey:
		if p.Algorithm != Ed25519 && p.Algorithm != ECDSAP256 {
			return bad("algorithm %q is not %s or %s", p.Algorithm, Ed25519, ECDSAP256)
		}
	case FamilyToken:
	case FamilyBodySignature:
		if p.SignatureField == "" || p.TokenField == "" || p.TimestampField == "" {
			return bad("a body signature needs its signature, token and timestamp fields")
		}
	case FamilyItemHMAC:
		if err := p.validateItems(); err != nil {
			return bad("%v", err)
		}
	default:
		return bad("unknown family %q", p.Family)
	}
	if p.AllowLegacySignatures && p.legacy.signatureHeader == "" {
		return bad("the sender has no legacy signatures to allow")
	}
	if p.Family != FamilyBodySignature && p.Family != FamilyItemHMAC && p.SignatureHeader == "" {
		return bad("no signature header")
	}
	need := map[Family]string{
		FamilyTimestampHMAC: "{timestamp}",
		FamilyMessageHMAC:   "{id}",
		FamilyURLHMAC:       "{url}",
	}
	if ph, ok := need[p.Family]; ok && !strings.Contains(p.Layout, ph) {
		return bad("a %s layout must contain %s", p.Family, ph)
	}
	if strings.Contains(p.Layout, "{id}") && p.IDHeader == "" {
		return bad("layout has {id} but no id header is named")
	}
	if strings.Contains(p.Layout, "{timestamp}") && p.TimestampHeader == "" && p.TimestampField == "" && !strings.Contains(p.HeaderFormat, "{timestamp}") {
		return bad("layout has {timestamp} but the timestamp has no source")
	}
	if p.Tolerance > 0 && p.TimestampHeader == "" && p.TimestampField == "" && !strings.Contains(p.HeaderFormat, "{timestamp}") {
		return bad("a tolerance needs a signed timestamp")
	}
	if p.EventID.Header != "" && (p.EventID.Header != p.IDHeader || !strings.Contains(p.Layout, "{id}")) {
		return bad("an event id header must be the signed id header")
	}
	if p.Family == FamilyToken && p.EventID.Field != "" {
		return bad("a token signs no body field; take the event id from the digest")
	}
	return nil
}

// withAliases returns r with the aliased headers (Preset.HeaderAliases)
// read under their canonical names, when the canonical set is incomplete and
// the aliased one complete.
func (v *Verifier) withAliases(r Request) Request {
	aliases := v.preset.HeaderAliases
	if len(aliases) == 0 {
		return r
	}
	canonicalComplete, aliasComplete := true, true
	for name, alias := range aliases {
		canonicalComplete = canonicalComplete && header(r.Headers, name) != ""
		aliasComplete = aliasComplete && header(r.Headers, alias) != ""
	}
	if canonicalComplete || !aliasComplete {
		return r
	}
	headers := maps.Clone(r.Headers)
	for name, alias := range aliases {
		headers[name] = header(r.Headers, alias)
	}
	r.Headers = headers
	return r
}

// Preset returns the preset v verifies.
func (v *Verifier) Preset() Preset { return v.preset }

// DefaultResultTTL is how long a completed result must be kept so that it
// outlives every retry the sender can still make.
func (v *Verifier) DefaultResultTTL() time.Duration { return v.preset.ResultTTL }

// Verify checks r's signature against every accepted secret. It returns nil,
// or an error wrapping ErrNotSigned, ErrInvalidHeader, ErrNoValidSignature,
// ErrTooOld, ErrTooNew, ErrBadPayload (a body signature in a body that is not
// JSON) or ErrNoPublicURL; any of them means the delivery must be rejected.
// Errors never quote a header value.
func (v *Verifier) Verify(r Request) error {
	_, err := v.verify(r)
	return err
}

// verify returns the index of the secret that verified r.
func (v *Verifier) verify(r Request) (int, error) {
	r = v.withAliases(r)
	if v.preset.Handshake == HandshakeWooCommercePing && v.isWooCommercePing(r) {
		return -1, nil
	}
	if v.usesLegacySignature(r) {
		return v.verifyLegacy(r)
	}
	if err := v.legacyNotAllowed(r); err != nil {
		return -1, err
	}
	switch v.preset.Family {
	case FamilyItemHMAC:
		return v.verifyItems(r)
	case FamilyToken:
		return v.verifyToken(r)
	case FamilyPublicKey:
		return v.verifyPublicKey(r)
	case FamilyBodySignature:
		return v.verifyBodySignature(r)
	default:
		return v.verifyHMAC(r)
	}
}
