package webhook

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// TwitchMessageTypeHeader names the kind of a Twitch EventSub message:
// notification, webhook_callback_verification or revocation.
const TwitchMessageTypeHeader = "twitch-eventsub-message-type"

// handshake returns the answer to an endpoint-validation request, and
// whether r is one. It is decided from the signed body, so a captured
// delivery cannot be turned into a handshake (or out of one) by a header.
func (v *Verifier) handshake(r Request) (*Handshake, bool, error) {
	switch v.preset.Handshake {
	case HandshakeDiscordPing:
		// https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-acknowledging-ping-requests
		if ping, err := bodyFieldIs(r.Body, "type", "1"); !ping {
			return nil, false, err
		}
		return &Handshake{ContentType: "application/json", Body: []byte(`{"type":1}`)}, true, nil
	case HandshakeZoomURLValidation:
		// https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint
		if validation, err := bodyFieldIs(r.Body, "event", "endpoint.url_validation"); !validation {
			return nil, false, err
		}
		plain, err := schemeJSONPath(r.Body, "payload.plainToken")
		if err != nil {
			return nil, true, fmt.Errorf("%w: endpoint.url_validation without payload.plainToken: %w", ErrBadPayload, err)
		}
		// Answer with the secret that signed the request: during a rotation
		// Zoom validates with the new one.
		i, _ := v.verify(r)
		if i < 0 {
			i = 0
		}
		return jsonHandshake(struct {
			PlainToken     string `json:"plainToken"`
			EncryptedToken string `json:"encryptedToken"`
		}{plain, hex.EncodeToString(schemeMAC(SHA256, v.keys[i], []byte(plain)))})
	case HandshakeTwitchChallenge:
		// https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#responding-to-a-challenge-request
		// The challenge is in the signed body; the message-type header is
		// not signed, so either one makes this a handshake.
		challenge, err := schemeJSONPath(r.Body, "challenge")
		if err != nil {
			if header(r.Headers, TwitchMessageTypeHeader) == "webhook_callback_verification" || errors.Is(err, ErrBadPayload) {
				return nil, true, fmt.Errorf("%w: webhook_callback_verification without a challenge: %w", ErrBadPayload, err)
			}
			return nil, false, nil
		}
		return &Handshake{ContentType: "text/plain", Body: []byte(challenge)}, true, nil
	case HandshakeSlackURLVerification:
		if hs, ok, err := slackRateLimitNotice(r.Body); err != nil || ok {
			return hs, ok, err
		}
		// https://api.slack.com/events/url_verification
		if verification, err := bodyFieldIs(r.Body, "type", "url_verification"); !verification {
			return nil, false, err
		}
		challenge, err := schemeJSONText(r.Body, "challenge")
		if err != nil {
			return nil, true, fmt.Errorf("%w: url_verification without a challenge: %w", ErrBadPayload, err)
		}
		return jsonHandshake(map[string]string{"challenge": challenge})
	case handshakeIntercomPing:
		return intercomPing(r.Body)
	case HandshakeWooCommercePing:
		// https://github.com/woocommerce/woocommerce (class-wc-webhook.php, deliver_ping)
		if v.isWooCommercePing(r) {
			return &Handshake{ContentType: "text/plain"}, true, nil
		}
	}
	return nil, false, nil
}

// isWooCommercePing reports WooCommerce's unsigned ping: no signature header
// and a body of exactly "webhook_id=<digits>".
func (v *Verifier) isWooCommercePing(r Request) bool {
	if header(r.Headers, v.preset.SignatureHeader) != "" {
		return false
	}
	id, ok := strings.CutPrefix(string(r.Body), "webhook_id=")
	return ok && len(id) <= 20 && schemeDecimal(id)
}

// bodyFieldIs reports whether the JSON body's member at path is want. A
// missing member is a false, not an error (no handshake); an ambiguous body
// is ErrBadPayload.
func bodyFieldIs(body []byte, path, want string) (bool, error) {
	got, err := schemeJSONPath(body, path)
	if err != nil {
		if errors.Is(err, ErrBadPayload) {
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
