package webhook

import "github.com/idemlambda/idem/internal/preset"

// Two senders post, signed, to the same URL as their events, a request that
// is not an event: it carries no event id and nothing to forward, and the
// sender only needs a 200. Both are answered as handshakes
// (Delivery.Handshake, after the signature check), so neither is claimed nor
// forwarded: Intercom's ping (preset.HandshakeIntercomPing) and Slack's
// app_rate_limited notice (preset.HandshakeSlackAppRateLimited).

// emptyAnswer is the JSON body of a 200 to a notice.
var emptyAnswer = []byte(`{}`)

// intercomPing reports Intercom's ping: topic "ping" in the signed body.
func intercomPing(doc *document) (*Handshake, bool, error) {
	if ping, err := fieldIs(doc, "topic", "ping"); !ping {
		return nil, false, err
	}
	return &Handshake{Kind: string(preset.HandshakeIntercomPing), ContentType: "application/json", Body: emptyAnswer}, true, nil
}

// slackRateLimitNotice reports Slack's app_rate_limited notice: body type
// "app_rate_limited" (the envelope's type, which an event_callback's is not).
func slackRateLimitNotice(doc *document) (*Handshake, bool, error) {
	if notice, err := fieldIs(doc, "type", string(preset.HandshakeSlackAppRateLimited)); !notice {
		return nil, false, err
	}
	return &Handshake{Kind: string(preset.HandshakeSlackAppRateLimited), ContentType: "application/json", Body: emptyAnswer}, true, nil
}
