package webhook

import (
	"crypto/hmac"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Slack signs each request with two headers:
//
//	x-slack-request-timestamp: 1531420618
//	x-slack-signature: v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503
//
// the hex HMAC-SHA256, keyed with the app's signing secret, of
// "v0:<timestamp>:<body>". Events API deliveries are JSON; their event_id is
// the deduplication key, which Slack's retries (a few, within minutes) keep.
// A url_verification request is answered with its challenge instead.
const (
	// SlackSignatureHeader is the header carrying Slack's signature.
	SlackSignatureHeader = "x-slack-signature"
	// SlackTimestampHeader carries the Unix time of signing.
	SlackTimestampHeader = "x-slack-request-timestamp"
	// SlackResultTTL is how long a completed Slack result is kept: Slack
	// retries within minutes.
	SlackResultTTL = 24 * time.Hour
)

// slackVersion is the only signature version Slack defines.
const slackVersion = "v0"

// SlackSignature returns the x-slack-signature header value Slack sends with
// body signed with secret at t: "v0=<hex HMAC-SHA256 of v0:t:body>". The
// matching x-slack-request-timestamp is t in Unix seconds.
func SlackSignature(secret string, body []byte, t time.Time) string {
	return slackVersion + "=" + hex.EncodeToString(slackMAC([]byte(secret), unixString(t), body))
}

// slackMAC is HMAC-SHA256(secret, "v0:timestamp:body").
func slackMAC(secret []byte, timestamp string, body []byte) []byte {
	return hmacSHA256(secret, []byte(slackVersion+":"+timestamp+":"), body)
}

type slackProvider struct {
	secrets   [][]byte
	tolerance time.Duration
}

func newSlack(c config) (Provider, error) {
	p := &slackProvider{tolerance: c.tolerance}
	for _, s := range c.secrets {
		p.secrets = append(p.secrets, []byte(s))
	}
	return p, nil
}

func (p *slackProvider) Name() string { return "slack" }

func (p *slackProvider) DefaultResultTTL() time.Duration { return SlackResultTTL }

// parseSlackSignature parses "v0=<64 hex digits>".
func parseSlackSignature(v string) ([]byte, error) {
	digest, ok := strings.CutPrefix(v, slackVersion+"=")
	if !ok {
		return nil, fmt.Errorf("%w: %s does not start with %s=", ErrInvalidHeader, SlackSignatureHeader, slackVersion)
	}
	sig, ok := decodeHexMAC(digest)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a hex HMAC-SHA256", ErrInvalidHeader, SlackSignatureHeader)
	}
	return sig, nil
}

// Verify checks the timestamp within tolerance, then the signature against
// every secret.
func (p *slackProvider) Verify(headers map[string]string, body []byte, now time.Time) error {
	signature, timestamp := header(headers, SlackSignatureHeader), header(headers, SlackTimestampHeader)
	if signature == "" || timestamp == "" {
		return fmt.Errorf("%w: %s and %s are both required", ErrNotSigned, SlackSignatureHeader, SlackTimestampHeader)
	}
	sig, err := parseSlackSignature(signature)
	if err != nil {
		return err
	}
	signedAt, ok := parseTimestamp(timestamp)
	if !ok {
		return fmt.Errorf("%w: %s is not a Unix time", ErrInvalidHeader, SlackTimestampHeader)
	}
	if err := checkTolerance(signedAt, now, p.tolerance); err != nil {
		return err
	}
	for _, secret := range p.secrets {
		if hmac.Equal(slackMAC(secret, timestamp, body), sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: checked against %d secret(s)", ErrNoValidSignature, len(p.secrets))
}

// Event reads an Events API body. url_verification yields only the
// challenge; anything else needs an event_id, and gets event.type as its type
// and the team (and channel, when the event names one) as its object.
func (p *slackProvider) Event(_ map[string]string, body []byte) (Event, error) {
	obj, err := decodeObject(body)
	if err != nil {
		return Event{}, err
	}
	if obj.str("type") == "url_verification" {
		challenge := obj.str("challenge")
		if challenge == "" {
			return Event{}, fmt.Errorf("%w: url_verification without a challenge", ErrBadPayload)
		}
		return Event{Type: "url_verification", Challenge: challenge}, nil
	}
	id, err := obj.idString("event_id")
	if err != nil {
		return Event{}, err
	}
	ev := Event{ID: id, Type: obj.str("type")}
	if ev.ID == "" {
		return Event{}, fmt.Errorf("%w: slack %s body has no event_id", ErrNoEventID, quote(ev.Type))
	}
	ev.ObjectID = obj.str("team_id")
	if inner := obj.obj("event"); inner != nil {
		if t := inner.str("type"); t != "" {
			ev.Type = t
		}
		// channel is an id for most events, an object for channel_created.
		if channel := inner.str("channel"); channel != "" {
			if ev.ObjectID != "" {
				ev.ObjectID += "/"
			}
			ev.ObjectID += channel
		}
	}
	return ev, nil
}

func (p *slackProvider) Sign(secret string, body []byte, now time.Time) map[string]string {
	return map[string]string{
		SlackSignatureHeader: SlackSignature(secret, body, now),
		SlackTimestampHeader: unixString(now),
	}
}

// Sample is an event_callback carrying a message event; eventID becomes the
// event_id.
func (p *slackProvider) Sample(eventID string, now time.Time) ([]byte, map[string]string) {
	const (
		team    = "T0001IDEM"
		channel = "C0001DEMO"
		app     = "A0001IDEM"
	)
	ts := fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
	body := map[string]any{
		"token":      "Jhj5dZrVaK7ZwHHjRyZWjbDl",
		"team_id":    team,
		"api_app_id": app,
		"event": map[string]any{
			"type":         "message",
			"channel":      channel,
			"channel_type": "channel",
			"user":         "U2147483697",
			"text":         "Live long and prosper.",
			"ts":           ts,
			"event_ts":     ts,
		},
		"type":       "event_callback",
		"event_id":   eventID,
		"event_time": now.Unix(),
		"authorizations": []any{map[string]any{
			"team_id": team, "user_id": "U0001BOT", "is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false,
		"event_context":         derivedID("4-", eventID, 40),
	}
	return mustJSON(body, false), map[string]string{
		"content-type": "application/json",
		"user-agent":   "Slackbot 1.0 (+https://api.slack.com/robots)",
	}
}
