package webhook

import (
	"fmt"
	"strings"

	"github.com/idemlambda/idem/internal/preset"
)

// twilioSignatureSettingsHeader is where Twilio declares a SharedKey signature:
// "key=<SharedKey sid>,algorithm=HMAC_SHA256". Twilio adds it when a Webhook
// Rule signs the webhook with a SharedKey instead of the account's Auth
// Token; the content signed is the same (the URL and the sorted form
// parameters), only the HMAC's hash and key change. Without it, the
// signature is the Auth Token's HMAC-SHA1.
const twilioSignatureSettingsHeader = "x-twilio-webhooks-signature-settings"

// maxSignatureSettings bounds the settings header read, so that a hostile
// header costs bounded work; Twilio's is under 100 bytes.
const maxSignatureSettings = 1024

// twilioAlgorithms are the algorithm names a Twilio settings header may carry,
// compared without regard to case as twilio-node compares them.
var twilioAlgorithms = map[string]preset.Algorithm{"HMAC_SHA1": preset.SHA1, "HMAC_SHA256": preset.SHA256}

// twilioSignatureAlgorithm returns the HMAC algorithm a Twilio settings header
// declares: the value of its first non-empty "algorithm=" element, and
// fallback for an empty header or one without it, as twilio-node's
// getSignatureAlgorithm reads it. An algorithm Twilio does not define, or a
// header too long to be Twilio's, is ErrInvalidHeader: the delivery is
// refused, as twilio-node refuses it.
func twilioSignatureAlgorithm(value string, fallback preset.Algorithm) (preset.Algorithm, error) {
	if len(value) > maxSignatureSettings {
		return "", fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalidHeader, twilioSignatureSettingsHeader, maxSignatureSettings)
	}
	for part := range strings.SplitSeq(value, ",") {
		key, name, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(key) != "algorithm" {
			continue
		}
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		alg, known := twilioAlgorithms[strings.ToUpper(name)]
		if !known {
			return "", fmt.Errorf("%w: %s names the unsupported algorithm %s", ErrInvalidHeader, twilioSignatureSettingsHeader, quote(name))
		}
		return alg, nil
	}
	return fallback, nil
}

// requestAlgorithm returns the HMAC algorithm of r and its MAC size: the
// preset's, or the one r declares in the preset's settings header.
func (v *Verifier) requestAlgorithm(r Request) (preset.Algorithm, int, error) {
	p := v.preset
	if p.SignatureSettingsHeader == "" {
		return p.Algorithm, v.macSize, nil
	}
	alg, err := twilioSignatureAlgorithm(v.header(r.Header, p.SignatureSettingsHeader), p.Algorithm)
	if err != nil {
		return "", 0, err
	}
	return alg, hashOf(alg)().Size(), nil
}
