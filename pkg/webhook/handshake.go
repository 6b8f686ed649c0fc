package webhook

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/idemlambda/idem/internal/preset"
)

// twitchMessageTypeHeader names the kind of a Twitch EventSub message:
// notification, webhook_callback_verification or revocation.
const twitchMessageTypeHeader = "twitch-eventsub-message-type"

// handshake returns the answer to an endpoint-validation request, and
// whether r is one. It is decided from the signed body, so a captured
// delivery cannot be turned into a handshake (or out of one) by a header.
// secret is the index of the secret that verified r.
func (v *Verifier) handshake(r Request, doc *document, secret int) (*Handshake, bool, error) {
	switch v.preset.Handshake {
	case preset.HandshakeDiscordPing:
		// https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-acknowledging-ping-requests
		if ping, err := fieldIs(doc, "type", "1"); !ping {
			return nil, false, err
		}
		return &Handshake{ContentType: "application/json", Body: []byte(`{"type":1}`)}, true, nil
	case preset.HandshakeZoomURLValidation:
		return v.zoomValidation(doc, secret)
	case preset.HandshakeTwitchChallenge:
		return v.twitchChallenge(r, doc)
	case preset.HandshakeSlackURLVerification:
		return slackVerification(doc)
	case preset.HandshakeIntercomPing:
		return intercomPing(doc)
	case preset.HandshakeWooCommercePing:
		// https://github.com/woocommerce/woocommerce (class-wc-webhook.php, deliver_ping)
		if v.isWooCommercePing(r) {
			return &Handshake{ContentType: "text/plain"}, true, nil
		}
	}
	return nil, false, nil
}

// twitchChallenge answers Twitch's webhook_callback_verification with its challenge.
// https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#responding-to-a-challenge-request
// The challenge is in the signed body; the message-type header is not
// signed, so either one makes this a handshake.
func (v *Verifier) twitchChallenge(r Request, doc *document) (*Handshake, bool, error) {
	challenge, err := doc.scalar("challenge", false)
	if err != nil {
		if v.header(r.Header, twitchMessageTypeHeader) == "webhook_callback_verification" || errors.Is(err, ErrBadPayload) {
			return nil, true, fmt.Errorf("%w: webhook_callback_verification without a challenge: %w", ErrBadPayload, err)
		}
		return nil, false, nil
	}
	return &Handshake{ContentType: "text/plain", Body: []byte(challenge)}, true, nil
}

// slackVerification answers Slack's url_verification with its challenge, and
// acknowledges Slack's app_rate_limited notice.
// https://api.slack.com/events/url_verification
func slackVerification(doc *document) (*Handshake, bool, error) {
	if hs, ok, err := slackRateLimitNotice(doc); err != nil || ok {
		return hs, ok, err
	}
	if verification, err := fieldIs(doc, "type", "url_verification"); !verification {
		return nil, false, err
	}
	challenge, err := doc.scalar("challenge", true)
	if err != nil {
		return nil, true, fmt.Errorf("%w: url_verification without a challenge: %w", ErrBadPayload, err)
	}
	return jsonHandshake(map[string]string{"challenge": challenge})
}

// zoomValidation answers Zoom's endpoint.url_validation with the secret that
// signed the request: during a rotation Zoom validates with the new one.
// https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint
func (v *Verifier) zoomValidation(doc *document, secret int) (*Handshake, bool, error) {
	if validation, err := fieldIs(doc, "event", "endpoint.url_validation"); !validation {
		return nil, false, err
	}
	plain, err := doc.scalar("payload.plainToken", false)
	if err != nil {
		return nil, true, fmt.Errorf("%w: endpoint.url_validation without payload.plainToken: %w", ErrBadPayload, err)
	}
	return jsonHandshake(struct {
		PlainToken     string `json:"plainToken"`
		EncryptedToken string `json:"encryptedToken"`
	}{plain, hex.EncodeToString(mac(preset.SHA256, v.keys[max(secret, 0)], []byte(plain)))})
}

// isWooCommercePing reports WooCommerce's unsigned ping: no signature header
// and a body of exactly "webhook_id=<digits>".
func (v *Verifier) isWooCommercePing(r Request) bool {
	if v.header(r.Header, v.preset.SignatureHeader) != "" {
		return false
	}
	id, ok := strings.CutPrefix(string(r.Body), "webhook_id=")
	return ok && len(id) <= 20 && isDecimal(id)
}

// fieldIs reports whether the JSON body's member at path is want. A missing
// member, or a body that is not JSON, is a false, not an error (no
// handshake); an ambiguous body is ErrBadPayload.
func fieldIs(doc *document, path, want string) (bool, error) {
	if doc.err != nil {
		return false, nil
	}
	got, err := doc.scalar(path, false)
	if err != nil {
		if errors.Is(err, ErrBadPayload) && !errors.Is(err, errNotScalar) {
			return false, err
		}
		return false, nil
	}
	return got == want, nil
}

// jsonHandshake is a handshake answering with the JSON of answer.
func jsonHandshake(answer any) (*Handshake, bool, error) {
	body, err := json.Marshal(answer)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	return &Handshake{ContentType: "application/json", Body: body}, true, nil
}
