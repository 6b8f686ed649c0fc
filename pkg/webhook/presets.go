package webhook

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

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
	Preset{Name: "stripe", Family: FamilyTimestampHMAC, SignatureHeader: StripeSignatureHeader,
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
	Preset{Name: "github", Family: FamilyBodyHMAC, SignatureHeader: GitHubSignatureHeader, Prefix: "sha256=",
		DeliveryIDHeaders: []string{GitHubDeliveryHeader}, EventType: Source{Header: GitHubEventHeader},
		// A webhook whose content type is application/x-www-form-urlencoded
		// sends its JSON in the payload field.
		FormPayloadField: "payload", ObjectField: "repository.full_name|organization.login",
		ResultTTL: 96 * time.Hour, Retries: "no automatic retry; failed deliveries of the past 3 days can be redelivered: https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks"},
	// https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook
	// Only the body is signed: the key is its digest; the webhook id
	// (x-shopify-event-id when absent) and topic are unsigned.
	Preset{Name: "shopify", Family: FamilyBodyHMAC, SignatureHeader: ShopifyHMACHeader, Encoding: Base64,
		DeliveryIDHeaders: []string{ShopifyWebhookIDHeader, ShopifyEventIDHeader}, EventType: Source{Header: ShopifyTopicHeader},
		ObjectField: "id|admin_graphql_api_id",
		ResultTTL:   72 * time.Hour, Retries: "8 retries over 4 hours (48 hours under the older policy): https://shopify.dev/docs/apps/build/webhooks/troubleshooting-webhooks"},
	// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
	// Each space-separated "v1,<base64>" entry is a candidate; other
	// versions and malformed entries are non-matches, as in the
	// reference libraries. Svix names the same headers svix-*.
	Preset{Name: "standard", Family: FamilyMessageHMAC, SignatureHeader: StandardSignatureHeader,
		HeaderFormat: "v1,{signature}", IDHeader: StandardIDHeader, TimestampHeader: StandardTimestampHeader,
		SecretFormat: SecretWhsec, Encoding: Base64, Layout: "{id}.{timestamp}.{body}", Tolerance: DefaultTolerance,
		EventID: Source{Header: StandardIDHeader}, EventType: Source{Field: "type"}, ObjectField: "data.id",
		HeaderAliases: map[string]string{
			StandardIDHeader:        "svix-id",
			StandardTimestampHeader: "svix-timestamp",
			StandardSignatureHeader: "svix-signature",
		},
		ResultTTL: 48 * time.Hour, Retries: "Svix: 8 attempts, the last about 28 hours after the first: https://docs.svix.com/retries"},
	// https://api.slack.com/authentication/verifying-requests-from-slack
	Preset{Name: "slack", Family: FamilyTimestampHMAC, SignatureHeader: SlackSignatureHeader, Prefix: "v0=",
		TimestampHeader: SlackTimestampHeader, Layout: "v0:{timestamp}:{body}", Tolerance: DefaultTolerance,
		EventID: Source{Field: "event_id"}, EventType: Source{Field: "event.type|type", Text: true},
		// The team, and the channel when the event names one by id.
		ObjectField: "team_id+event.channel", Handshake: HandshakeSlackURLVerification,
		ResultTTL: 24 * time.Hour, Retries: "3 retries: at once, after 1 minute, after 5 minutes: https://api.slack.com/apis/events-api#retries"},
	// https://www.twilio.com/docs/usage/webhooks/webhooks-security
	// A SharedKey signature (a Webhook Rule's) declares its algorithm in
	// x-twilio-webhooks-signature-settings; without it, HMAC-SHA1.
	Preset{Name: "twilio", Family: FamilyURLHMAC, SignatureHeader: "x-twilio-signature",
		Algorithm: SHA1, Encoding: Base64, Layout: "{url}{form}", BodyHashParam: "bodySHA256",
		signatureSettingsHeader: twilioSignatureSettingsHeader,
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
		EventID: Source{Field: "id"}, EventType: Source{Field: "topic"}, ObjectField: "data.item.id", Handshake: handshakeIntercomPing,
		ResultTTL: 7 * 24 * time.Hour, Retries: "no per-notification schedule published; throttled notifications wait up to 2 hours and a failing subscription is suspended after 7 days: https://developers.intercom.com/docs/webhooks/webhook-notifications"},
	// https://developers.hubspot.com/docs/guides/apps/authentication/validating-requests#validate-the-v3-request-signature
	Preset{Name: "hubspot", Family: FamilyURLHMAC, SignatureHeader: "x-hubspot-signature-v3",
		TimestampHeader: "x-hubspot-request-timestamp", TimestampFormat: UnixMilliseconds, Encoding: Base64,
		Layout: "{method}{url}{body}{timestamp}", URLDecodeReserved: true, Tolerance: DefaultTolerance,
		// The body is an array of events; each retry raises attemptNumber.
		DigestOmits: []string{"attemptNumber"},
		// v1 and v2 (no timestamp), with AllowLegacySignatures only.
		legacy:    legacyScheme{signatureHeader: "x-hubspot-signature", versionHeader: "x-hubspot-signature-version"},
		ResultTTL: 96 * time.Hour, Retries: "up to 10 retries over 24 hours (webhooks API); workflow webhook actions are quoted at up to 3 days: https://developers.hubspot.com/docs/api/webhooks"},
	// https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features
	Preset{Name: "sendgrid", Family: FamilyPublicKey, SignatureHeader: "x-twilio-email-event-webhook-signature",
		TimestampHeader: "x-twilio-email-event-webhook-timestamp", Algorithm: ECDSAP256, Encoding: Base64, Layout: "{timestamp}{body}",
		ResultTTL: 72 * time.Hour, Retries: "retried at increasing intervals for up to 24 hours after the event: https://docs.sendgrid.com/for-developers/tracking-events/troubleshooting"},
	// https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks
	Preset{Name: "mailgun", Family: FamilyBodySignature,
		SignatureField: "signature.signature", TokenField: "signature.token", TimestampField: "signature.timestamp",
		Layout: "{timestamp}{token}",
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

// Header names of the original five senders, for tests and tools that build
// their deliveries.
const (
	// StripeSignatureHeader carries Stripe's "t=...,v1=..." signature.
	StripeSignatureHeader = "stripe-signature"
	// GitHubSignatureHeader carries GitHub's "sha256=<hex>" signature.
	GitHubSignatureHeader = "x-hub-signature-256"
	// GitHubDeliveryHeader carries GitHub's delivery GUID, unsigned.
	GitHubDeliveryHeader = "x-github-delivery"
	// GitHubEventHeader carries GitHub's event name, unsigned.
	GitHubEventHeader = "x-github-event"
	// ShopifyHMACHeader carries Shopify's base64 signature.
	ShopifyHMACHeader = "x-shopify-hmac-sha256"
	// ShopifyWebhookIDHeader carries Shopify's delivery id, unsigned.
	ShopifyWebhookIDHeader = "x-shopify-webhook-id"
	// ShopifyEventIDHeader carries Shopify's event id, unsigned; the
	// delivery id when ShopifyWebhookIDHeader is absent.
	ShopifyEventIDHeader = "x-shopify-event-id"
	// ShopifyTopicHeader carries Shopify's topic, unsigned.
	ShopifyTopicHeader = "x-shopify-topic"
	// StandardIDHeader carries the Standard Webhooks message id, signed.
	StandardIDHeader = "webhook-id"
	// StandardTimestampHeader carries the Standard Webhooks signing time.
	StandardTimestampHeader = "webhook-timestamp"
	// StandardSignatureHeader carries the Standard Webhooks signature list.
	StandardSignatureHeader = "webhook-signature"
	// SlackSignatureHeader carries Slack's "v0=<hex>" signature.
	SlackSignatureHeader = "x-slack-signature"
	// SlackTimestampHeader carries Slack's signing time.
	SlackTimestampHeader = "x-slack-request-timestamp"
)

// Lookup returns the preset called name.
func Lookup(name string) (Preset, bool) {
	p, ok := presets[name]
	return p, ok
}

// PresetNames lists the preset names Lookup knows, sorted.
func PresetNames() []string {
	return slices.Sorted(maps.Keys(presets))
}

// PresetFor returns the preset of a function deployed with
// WEBHOOK_PROVIDER=name: a named preset, or for HMACPresetName the one the
// WEBHOOK_HMAC_* settings describe, read through getenv. An unknown name is
// an error wrapping ErrUnknownProvider; a bad setting a *setting.Error.
func PresetFor(name string, getenv func(string) string) (Preset, error) {
	if name == HMACPresetName {
		return HMACPresetFromEnv(getenv)
	}
	if p, ok := presets[name]; ok {
		return p, nil
	}
	return Preset{}, fmt.Errorf("%w %q (presets: %s, %s)", ErrUnknownProvider, name, strings.Join(PresetNames(), ", "), HMACPresetName)
}
