package webhook

// Two senders post, signed, to the same URL as their events, a request that
// is not an event: it carries no event id and nothing to forward, and the
// sender only needs a 200. Both are answered as handshakes (Delivery.Handshake,
// after Verify), so neither is claimed in Redis nor forwarded.
const (
	// handshakeIntercomPing is Intercom's ping, sent when a webhook is saved
	// or tested: a notification with topic "ping" and "id": null
	// (https://developers.intercom.com/docs/references/webhooks/webhook-models).
	handshakeIntercomPing HandshakeKind = "intercom-ping"
	// handshakeSlackAppRateLimited is Slack's app_rate_limited notice, sent
	// at most once a minute while an app's event deliveries are being
	// dropped for exceeding 30,000 an hour; it has no event_id
	// (https://api.slack.com/apis/events-api#rate-limiting). It is the Slack
	// preset's second handshake: its Kind tells it from url_verification.
	handshakeSlackAppRateLimited HandshakeKind = "app_rate_limited"
)

// emptyAnswer is the JSON body of a 200 to a notice.
var emptyAnswer = []byte(`{}`)

// intercomPing reports Intercom's ping: topic "ping" in the signed body.
func intercomPing(body []byte) (*Handshake, bool, error) {
	if ping, err := bodyFieldIs(body, "topic", "ping"); !ping {
		return nil, false, err
	}
	return &Handshake{Kind: handshakeIntercomPing, ContentType: "application/json", Body: emptyAnswer}, true, nil
}

// slackRateLimitNotice reports Slack's app_rate_limited notice: body type
// "app_rate_limited" (the envelope's type, which an event_callback's is not).
func slackRateLimitNotice(body []byte) (*Handshake, bool, error) {
	if notice, err := bodyFieldIs(body, "type", string(handshakeSlackAppRateLimited)); !notice {
		return nil, false, err
	}
	return &Handshake{Kind: handshakeSlackAppRateLimited, ContentType: "application/json", Body: emptyAnswer}, true, nil
}
