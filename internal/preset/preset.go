// Package preset is the table of webhook senders package webhook verifies: for each, how it
// signs (its family, headers, encoding and signed layout), where its event id and type come
// from, its tolerance, how long results are kept and its endpoint handshake. Package webhook
// verifies from these rows, package webhooktest signs from them, independently, and the
// application's tools read them; none of it is public API.
package preset

import (
	"cmp"
	"maps"
	"slices"
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
	// own.
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
	// HandshakeIntercomPing answers Intercom's ping, sent when a webhook is
	// saved or tested: a signed notification with topic "ping" and "id":
	// null (https://developers.intercom.com/docs/references/webhooks/webhook-models),
	// with {}.
	HandshakeIntercomPing HandshakeKind = "intercom-ping"
	// HandshakeSlackAppRateLimited answers Slack's app_rate_limited notice
	// with {}: sent signed, at most once a minute, while Slack drops an
	// app's events for exceeding 30,000 an hour; it has no event_id
	// (https://api.slack.com/apis/events-api#rate-limiting). It is the Slack
	// preset's second exchange beside HandshakeSlackURLVerification.
	HandshakeSlackAppRateLimited HandshakeKind = "app_rate_limited"
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
	// AllowLegacySignatures accepts, when SignatureHeader is absent, the
	// sender's older signature versions (Legacy: HubSpot's v1 and v2). They
	// sign no timestamp, so a captured delivery verifies for ever and runs
	// again once its result has expired, and they are a SHA-256 of the
	// secret followed by the content, not an HMAC. Default false; a preset
	// without Legacy refuses it.
	AllowLegacySignatures bool
	// Legacy names the headers of the sender's older signature versions,
	// if it has any.
	Legacy LegacyScheme
	// SignatureSettingsHeader names the header in which the sender declares
	// another HMAC algorithm than Algorithm for one delivery (Twilio's
	// SharedKey signatures: "key=<sid>,algorithm=HMAC_SHA256").
	SignatureSettingsHeader string
}

// LegacyScheme names the headers of HubSpot's v1 and v2 signatures: the hex
// signature, and its version ("v1" or "v2"). As @hubspot/api-client computes
// them (src/utils/signature.ts), v1 is the SHA-256 of secret + body and v2
// of secret + method + URL + body.
type LegacyScheme struct {
	SignatureHeader string
	VersionHeader   string
}

// The senders verified through presets, at a glance (each row's Retries
// field cites the retry schedule's source):
//
//	preset             family          signature header (encoding)                    event id                      kept  last retry
//	stripe             timestamp-hmac  stripe-signature t=,v1= (hex)                  body id                       96h   3 days
//	github             body-hmac       x-hub-signature-256 sha256= (hex)              digest of body                96h   manual redelivery, 3 days
//	shopify            body-hmac       x-shopify-hmac-sha256 (base64)                 digest of body                72h   48 hours (8 retries over 4 hours today)
//	standard           message-hmac    webhook-signature v1, (base64)                 webhook-id                    48h   about 28 hours (Svix)
//	slack              timestamp-hmac  x-slack-signature v0= (hex)                    body event_id                 24h   3 retries within minutes
//	twilio             url-hmac        x-twilio-signature (base64 HMAC-SHA1/SHA256)   digest of URL + sorted form   24h   within seconds (connection overrides)
//	square             url-hmac        x-square-hmacsha256-signature (base64)         body event_id                 72h   24 hours
//	paddle             timestamp-hmac  paddle-signature ts=;h1= (hex)                 body event_id                 96h   3 days (live)
//	discord            public-key      x-signature-ed25519 (hex Ed25519)              body id                       24h   none (3 s to answer)
//	zoom               timestamp-hmac  x-zm-signature v0= (hex)                       digest of body                24h   about 85 minutes
//	twitch             message-hmac    twitch-eventsub-message-signature sha256=      twitch-eventsub-message-id    24h   minutes (10 min replay window)
//	linear             body-hmac       linear-signature (hex)                         digest of body, less stamp    48h   about 7 hours
//	gitlab             token           x-gitlab-token                                 digest of body                72h   manual resend (2 days)
//	bitbucket          body-hmac       x-hub-signature sha256= (hex)                  digest of body                24h   minutes
//	intercom           body-hmac       x-hub-signature sha1= (hex HMAC-SHA1)          body id                       7d    unpublished (suspended after 7 days)
//	hubspot            url-hmac        x-hubspot-signature-v3 (base64); v1/v2 opt-in  digest of body, less attempt  96h   24 hours (workflows: 3 days)
//	sendgrid           public-key      x-twilio-email-event-webhook-signature (ECDSA) digest of body                72h   24 hours
//	mailgun            body-signature  signature object in the body (hex)            body signature.token          24h   8 hours
//	razorpay           body-hmac       x-razorpay-signature (hex)                     digest of body                8d    24 hours; replays up to 7 days
//	woocommerce        body-hmac       x-wc-webhook-signature (base64)                digest of body                24h   none
//	calendly           timestamp-hmac  calendly-webhook-signature t=,v1= (hex)        digest of body                48h   24 hours
//	typeform           body-hmac       typeform-signature sha256= (base64)            body event_id                 48h   10 hours
//	coinbase-commerce  body-hmac       x-cc-webhook-signature (hex)                   body event.id                 96h   3 days
//	adyen              item-hmac       additionalData.hmacSignature per item (base64) item pspReference|eventCode  744h  30 days

// presets is the table of senders verified through a signing family, by
// name. Each row says how its sender signs, where its event id and type come
// from, how long results are kept (longer than the sender's last retry, in
// Retries), and which handshake it expects.
//
// Where a sender's own delivery id travels outside the signature (Razorpay's
// x-razorpay-event-id, WooCommerce's x-wc-webhook-delivery-id, GitLab's
// x-gitlab-event-uuid, Bitbucket's x-request-uuid, ...), the event id is the
// digest of the signed content instead, so a captured delivery re-sent under
// a fresh id header is a replay, never new work.
var presets = presetTable(
	// https://docs.stripe.com/webhooks#verify-manually: the whole
	// "whsec_..." string is the key, not decoded. A v1 that is not a
	// hex HMAC-SHA256 is a non-match ("Ignore invalid signatures",
	// stripe-go webhook/client.go); v0 and unknown elements are ignored.
	Preset{Name: "stripe", Family: FamilyTimestampHMAC, SignatureHeader: "stripe-signature",
		HeaderFormat: "t={timestamp},v1={signature}", Layout: "{timestamp}.{body}", Tolerance: DefaultTolerance,
		EventID: Source{Field: "id"}, EventType: Source{Field: "type", Text: true},
		ObjectField: "data.object.id|related_object.id",
		// pending_webhooks counts the event's undelivered webhooks: it
		// describes the delivery, not the event, and may change between
		// attempts, so the fingerprint covers every other member.
		FingerprintFields: []string{"id", "object", "account", "api_version", "context", "created",
			"data", "livemode", "reason", "related_object", "request", "type"},
		ResultTTL: 96 * time.Hour, Retries: "live mode: up to 3 days with exponential back-off: https://docs.stripe.com/webhooks#retries"},
	// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
	// The legacy SHA-1 x-hub-signature is not accepted. Neither
	// x-github-delivery nor x-github-event is signed: the key is the
	// body's digest, which a redelivery (the same bytes) keeps.
	Preset{Name: "github", Family: FamilyBodyHMAC, SignatureHeader: "x-hub-signature-256", Prefix: "sha256=",
		DeliveryIDHeaders: []string{"x-github-delivery"}, EventType: Source{Header: "x-github-event"},
		// A webhook whose content type is application/x-www-form-urlencoded
		// sends its JSON in the payload field.
		FormPayloadField: "payload", ObjectField: "repository.full_name|organization.login",
		ResultTTL: 96 * time.Hour, Retries: "no automatic retry; failed deliveries of the past 3 days can be redelivered: https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks"},
	// https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook
	// Only the body is signed: the key is its digest; the webhook id
	// (x-shopify-event-id when absent) and topic are unsigned.
	Preset{Name: "shopify", Family: FamilyBodyHMAC, SignatureHeader: "x-shopify-hmac-sha256", Encoding: Base64,
		DeliveryIDHeaders: []string{"x-shopify-webhook-id", "x-shopify-event-id"}, EventType: Source{Header: "x-shopify-topic"},
		ObjectField: "id|admin_graphql_api_id",
		ResultTTL:   72 * time.Hour, Retries: "8 retries over 4 hours (48 hours under the older policy): https://shopify.dev/docs/apps/build/webhooks/troubleshooting-webhooks"},
	// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
	// Each space-separated "v1,<base64>" entry is a candidate; other
	// versions and malformed entries are non-matches, as in the
	// reference libraries. Svix names the same headers svix-*.
	Preset{Name: "standard", Family: FamilyMessageHMAC, SignatureHeader: "webhook-signature",
		HeaderFormat: "v1,{signature}", IDHeader: "webhook-id", TimestampHeader: "webhook-timestamp",
		SecretFormat: SecretWhsec, Encoding: Base64, Layout: "{id}.{timestamp}.{body}", Tolerance: DefaultTolerance,
		EventID: Source{Header: "webhook-id"}, EventType: Source{Field: "type"}, ObjectField: "data.id",
		HeaderAliases: map[string]string{
			"webhook-id":        "svix-id",
			"webhook-timestamp": "svix-timestamp",
			"webhook-signature": "svix-signature",
		},
		ResultTTL: 48 * time.Hour, Retries: "Svix: 8 attempts, the last about 28 hours after the first: https://docs.svix.com/retries"},
	// https://api.slack.com/authentication/verifying-requests-from-slack
	Preset{Name: "slack", Family: FamilyTimestampHMAC, SignatureHeader: "x-slack-signature", Prefix: "v0=",
		TimestampHeader: "x-slack-request-timestamp", Layout: "v0:{timestamp}:{body}", Tolerance: DefaultTolerance,
		EventID: Source{Field: "event_id"}, EventType: Source{Field: "event.type|type", Text: true},
		// The team, and the channel when the event names one by id.
		ObjectField: "team_id+event.channel", Handshake: HandshakeSlackURLVerification,
		ResultTTL: 24 * time.Hour, Retries: "3 retries: at once, after 1 minute, after 5 minutes: https://api.slack.com/apis/events-api#retries"},
	// https://www.twilio.com/docs/usage/webhooks/webhooks-security
	// A SharedKey signature (a Webhook Rule's) declares its algorithm in
	// x-twilio-webhooks-signature-settings; without it, HMAC-SHA1.
	Preset{Name: "twilio", Family: FamilyURLHMAC, SignatureHeader: "x-twilio-signature",
		Algorithm: SHA1, Encoding: Base64, Layout: "{url}{form}", BodyHashParam: "bodySHA256",
		SignatureSettingsHeader: "x-twilio-webhooks-signature-settings",
		ResultTTL:               24 * time.Hour, Retries: "none by default; connection overrides (#rc=, at most 5 retries) retry within minutes: https://www.twilio.com/docs/usage/webhooks/webhooks-connection-overrides"},
	// https://developer.squareup.com/docs/webhooks/step3validate
	Preset{Name: "square", Family: FamilyURLHMAC, SignatureHeader: "x-square-hmacsha256-signature",
		Encoding: Base64, Layout: "{url}{body}",
		EventID: Source{Field: "event_id"}, EventType: Source{Field: "type"}, ObjectField: "data.id",
		ResultTTL: 72 * time.Hour, Retries: "retried for up to 24 hours, then discarded: https://developer.squareup.com/docs/webhooks/troubleshooting"},
	// https://developer.paddle.com/webhooks/signature-verification
	Preset{Name: "paddle", Family: FamilyTimestampHMAC, SignatureHeader: "paddle-signature",
		HeaderFormat: "ts={timestamp};h1={signature}", Layout: "{timestamp}:{body}",
		// paddle-node-sdk's WebhooksValidator allows 5 seconds.
		Tolerance: 5 * time.Second, EventID: Source{Field: "event_id"}, EventType: Source{Field: "event_type"}, ObjectField: "data.id",
		ResultTTL: 96 * time.Hour, Retries: "live: 60 retries over 3 days; sandbox: 3 within 15 minutes: https://developer.paddle.com/webhooks/respond-to-webhooks#retry-logic"},
	// https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers
	Preset{Name: "discord", Family: FamilyPublicKey, SignatureHeader: "x-signature-ed25519",
		TimestampHeader: "x-signature-timestamp", Algorithm: Ed25519, Layout: "{timestamp}{body}", Tolerance: DefaultTolerance,
		EventID: Source{Field: "id"}, EventType: Source{Field: "type"}, Handshake: HandshakeDiscordPing,
		ResultTTL: 24 * time.Hour, Retries: "none: an interaction must be answered within 3 seconds and its token lives 15 minutes: https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-interaction"},
	// https://developers.zoom.us/docs/api/webhooks/#verify-with-zooms-header
	Preset{Name: "zoom", Family: FamilyTimestampHMAC, SignatureHeader: "x-zm-signature", Prefix: "v0=",
		TimestampHeader: "x-zm-request-timestamp", Layout: "v0:{timestamp}:{body}", Tolerance: DefaultTolerance,
		EventType: Source{Field: "event"}, Handshake: HandshakeZoomURLValidation,
		ResultTTL: 24 * time.Hour, Retries: "3 retries: 5 minutes after the first attempt, then 20 and 60 minutes apart (about 85 minutes in all): https://developers.zoom.us/blog/webhook-delays"},
	// https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message
	Preset{Name: "twitch", Family: FamilyMessageHMAC, SignatureHeader: "twitch-eventsub-message-signature", Prefix: "sha256=",
		IDHeader: "twitch-eventsub-message-id", TimestampHeader: "twitch-eventsub-message-timestamp", TimestampFormat: RFC3339,
		// Twitch: reject messages older than 10 minutes.
		Layout: "{id}{timestamp}{body}", Tolerance: 10 * time.Minute,
		EventID: Source{Header: "twitch-eventsub-message-id"}, EventType: Source{Field: "subscription.type"},
		ObjectField: "subscription.id", Handshake: HandshakeTwitchChallenge,
		ResultTTL: 24 * time.Hour, Retries: "a few retries within minutes, the same message id each time: https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#handling-duplicate-events"},
	// https://linear.app/developers/webhooks#securing-webhooks
	Preset{Name: "linear", Family: FamilyBodyHMAC, SignatureHeader: "linear-signature",
		TimestampField: "webhookTimestamp", TimestampFormat: UnixMilliseconds,
		// @linear/sdk's LinearWebhooks allows one minute.
		Tolerance: time.Minute,
		// Linear-Delivery is unsigned and each attempt may re-stamp
		// webhookTimestamp: the id is the digest of the body without it.
		DigestOmits: []string{"webhookTimestamp"}, EventType: Source{Field: "type"}, ObjectField: "data.id",
		ResultTTL: 48 * time.Hour, Retries: "3 retries: after 1 minute, 1 hour and 6 hours: https://linear.app/developers/webhooks#webhook-delivery"},
	// https://docs.gitlab.com/user/project/integrations/webhooks/#validate-requests-with-a-secret-token
	Preset{Name: "gitlab", Family: FamilyToken, SignatureHeader: "x-gitlab-token",
		EventType: Source{Field: "object_kind"},
		ResultTTL: 72 * time.Hour, Retries: "no automatic retry; recent events (2 days) can be resent by hand: https://docs.gitlab.com/user/project/integrations/webhook_events/"},
	// https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/#Secure-webhooks
	Preset{Name: "bitbucket", Family: FamilyBodyHMAC, SignatureHeader: "x-hub-signature", Prefix: "sha256=",
		EventType: Source{Header: "x-event-key"},
		ResultTTL: 24 * time.Hour, Retries: "up to two more attempts, at once, on a 5xx: https://support.atlassian.com/bitbucket-cloud/docs/troubleshoot-webhooks/"},
	// https://developers.intercom.com/docs/references/webhooks/webhook-models#signed-notifications
	Preset{Name: "intercom", Family: FamilyBodyHMAC, SignatureHeader: "x-hub-signature", Prefix: "sha1=", Algorithm: SHA1,
		EventID: Source{Field: "id"}, EventType: Source{Field: "topic"}, ObjectField: "data.item.id", Handshake: HandshakeIntercomPing,
		ResultTTL: 7 * 24 * time.Hour, Retries: "no per-notification schedule published; throttled notifications wait up to 2 hours and a failing subscription is suspended after 7 days: https://developers.intercom.com/docs/webhooks/webhook-notifications"},
	// https://developers.hubspot.com/docs/guides/apps/authentication/validating-requests#validate-the-v3-request-signature
	Preset{Name: "hubspot", Family: FamilyURLHMAC, SignatureHeader: "x-hubspot-signature-v3",
		TimestampHeader: "x-hubspot-request-timestamp", TimestampFormat: UnixMilliseconds, Encoding: Base64,
		Layout: "{method}{url}{body}{timestamp}", URLDecodeReserved: true, Tolerance: DefaultTolerance,
		// The body is an array of events; each retry raises attemptNumber.
		DigestOmits: []string{"attemptNumber"},
		// v1 and v2 (no timestamp), with AllowLegacySignatures only.
		Legacy:    LegacyScheme{SignatureHeader: "x-hubspot-signature", VersionHeader: "x-hubspot-signature-version"},
		ResultTTL: 96 * time.Hour, Retries: "up to 10 retries over 24 hours (webhooks API); workflow webhook actions are quoted at up to 3 days: https://developers.hubspot.com/docs/api/webhooks"},
	// https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features
	// The timestamp header is signed with the body; SendGrid's guide names
	// no window for it, so the 5 minutes Stripe, Slack and Standard
	// Webhooks document apply: a delivery signed longer ago is a replay.
	Preset{Name: "sendgrid", Family: FamilyPublicKey, SignatureHeader: "x-twilio-email-event-webhook-signature",
		TimestampHeader: "x-twilio-email-event-webhook-timestamp", Algorithm: ECDSAP256, Encoding: Base64, Layout: "{timestamp}{body}",
		Tolerance: DefaultTolerance,
		ResultTTL: 72 * time.Hour, Retries: "retried at increasing intervals for up to 24 hours after the event: https://docs.sendgrid.com/for-developers/tracking-events/troubleshooting"},
	// https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks
	Preset{Name: "mailgun", Family: FamilyBodySignature,
		SignatureField: "signature.signature", TokenField: "signature.token", TimestampField: "signature.timestamp",
		Layout: "{timestamp}{token}",
		// Mailgun's guide: check that the timestamp is not too far from the
		// current time, without being "too aggressive" since its deliveries
		// can be delayed; 15 minutes. Without it, a signature block captured
		// once would verify beside any event-data once its token's result
		// expired.
		Tolerance: 15 * time.Minute,
		// Mailgun signs its random token, not the event: the token is the
		// only signed identity, and a token seen once must not run again.
		EventID: Source{Field: "signature.token"}, EventType: Source{Field: "event-data.event"}, ObjectField: "event-data.id",
		ResultTTL: 24 * time.Hour, Retries: "retried during 8 hours (5 min, 10 min, 15 min, 1 h, 2 h, 4 h); a 406 stops them: https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries"},
	// https://razorpay.com/docs/webhooks/validate-test/
	Preset{Name: "razorpay", Family: FamilyBodyHMAC, SignatureHeader: "x-razorpay-signature",
		EventType: Source{Field: "event"},
		ResultTTL: 8 * 24 * time.Hour, Retries: "exponential backoff for 24 hours after the event; Dashboard replays of events up to 7 days old: https://razorpay.com/docs/webhooks/best-practices/"},
	// https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks
	Preset{Name: "woocommerce", Family: FamilyBodyHMAC, SignatureHeader: "x-wc-webhook-signature",
		SecretFormat: SecretHTMLSpecialChars, Encoding: Base64,
		EventType: Source{Header: "x-wc-webhook-topic"}, ObjectField: "id", Handshake: HandshakeWooCommercePing,
		ResultTTL: 24 * time.Hour, Retries: "no retry; a webhook is disabled after 5 consecutive failures: https://woocommerce.com/document/webhooks/"},
	// https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures
	Preset{Name: "calendly", Family: FamilyTimestampHMAC, SignatureHeader: "calendly-webhook-signature",
		HeaderFormat: "t={timestamp},v1={signature}", Layout: "{timestamp}.{body}",
		// Calendly's guide rejects signatures older than 3 minutes.
		Tolerance: 3 * time.Minute, EventType: Source{Field: "event"},
		ResultTTL: 48 * time.Hour, Retries: "exponential back-off for 24 hours, then the subscription is disabled: https://developer.calendly.com/api-docs/ZG9jOjM2MzE2MDM4-webhook-subscriptions"},
	// https://www.typeform.com/developers/webhooks/secure-your-webhooks/
	Preset{Name: "typeform", Family: FamilyBodyHMAC, SignatureHeader: "typeform-signature", Prefix: "sha256=", Encoding: Base64,
		EventID: Source{Field: "event_id"}, EventType: Source{Field: "event_type"}, ObjectField: "form_response.form_id",
		ResultTTL: 48 * time.Hour, Retries: "429, 408, 503 and 423 retried every 2-3 minutes for 10 hours; other errors 5 retries over about 3.5 hours: https://www.typeform.com/developers/webhooks/"},
	// https://docs.adyen.com/development-resources/webhooks/verify-hmac-signatures
	// Each notification item is signed, keyed and forwarded on its own
	// (adyen.go); the key is hex, as the Customer Area shows it.
	Preset{Name: "adyen", Family: FamilyItemHMAC, SignatureField: "additionalData.hmacSignature", Encoding: Base64,
		EventID: Source{Field: "pspReference,eventCode"}, EventType: Source{Field: "eventCode"}, ObjectField: "originalReference|pspReference",
		ResultTTL: 31 * 24 * time.Hour, Retries: "3 attempts within 27 seconds, then a retry queue at growing intervals (2 minutes to 8 hours) for up to 30 days: https://docs.adyen.com/development-resources/webhooks/troubleshoot"},
	// https://docs.cdp.coinbase.com/commerce-onchain/docs/webhooks-security
	Preset{Name: "coinbase-commerce", Family: FamilyBodyHMAC, SignatureHeader: "x-cc-webhook-signature",
		EventID: Source{Field: "event.id"}, EventType: Source{Field: "event.type"}, ObjectField: "event.data.id",
		ResultTTL: 96 * time.Hour, Retries: "exponential backoff for up to 3 days, at most 1 hour apart: https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-overview"},
)

// presetTable indexes rows by name, each completed with what its family
// implies unless the row says otherwise, so that a row states only what sets
// its sender apart: every family but FamilyToken signs with HMAC-SHA256
// (Algorithm SHA256) written in hex (Encoding Hex), and FamilyBodyHMAC signs
// the raw body (Layout "{body}").
func presetTable(rows ...Preset) map[string]Preset {
	table := make(map[string]Preset, len(rows))
	for _, p := range rows {
		if p.Family != FamilyToken {
			p.Algorithm = cmp.Or(p.Algorithm, SHA256)
			p.Encoding = cmp.Or(p.Encoding, Hex)
		}
		if p.Family == FamilyBodyHMAC {
			p.Layout = cmp.Or(p.Layout, "{body}")
		}
		table[p.Name] = p
	}
	return table
}

// Lookup returns the preset called name.
func Lookup(name string) (Preset, bool) {
	p, ok := presets[name]
	return p, ok
}

// Names lists the preset names Lookup knows, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(presets))
}

// DefaultTolerance is the window Stripe, Slack and Standard Webhooks document for a signed
// timestamp.
const DefaultTolerance = 300 * time.Second

// NewVerifier builds package webhook's *webhook.Verifier (returned as any: this package cannot
// name the type) from a row that differs from the table's, with an option the public
// constructor does not offer, such as AllowLegacySignatures, which the application turns on
// from a setting. Package webhook sets it when it is initialised; it is nil in a program that
// does not link package webhook.
var NewVerifier func(p Preset, secrets []string, tolerance time.Duration) (any, error)
