package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idemlambda/idem/pkg/webhook"
)

// FuzzAdyenVerify: whatever the body, a notification the verifier accepts
// has, in every item it returns, a signature that is the HMAC-SHA256 of that
// item's fingerprint (its signed fields) under the key, checked here with the
// standard library apart from the verifier; so nothing unsigned reaches a key.
func FuzzAdyenVerify(f *testing.F) {
	f.Add(readFixture(f, "sdk/adyen_items.json"))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"pspReference":"p","eventCode":"E","amount":{"value":1,"currency":"EUR"},"additionalData":{"hmacSignature":"ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="}}}]}`))
	key, _ := hex.DecodeString(adyenKey)
	v := presetVerifier(f, "adyen", adyenKey)
	f.Fuzz(func(t *testing.T, body []byte) {
		r := adyenRequest(body)
		if err := v.Verify(r); err != nil {
			return
		}
		d, err := v.Event(r)
		if err != nil {
			if !errors.Is(err, webhook.ErrBadPayload) && !errors.Is(err, webhook.ErrNoEventID) {
				t.Fatalf("Event error outside the sentinels: %v", err)
			}
			return
		}
		for _, it := range d.Items {
			var item struct {
				AdditionalData struct{ HMACSignature string } `json:"additionalData"`
			}
			if err := json.Unmarshal(it.Payload, &item); err != nil {
				t.Fatalf("payload %q: %v", it.Payload, err)
			}
			m := hmac.New(sha256.New, key)
			m.Write(it.Fingerprint.Content)
			if base64.StdEncoding.EncodeToString(m.Sum(nil)) != item.AdditionalData.HMACSignature {
				t.Fatalf("item %s accepted with a signature that is not the HMAC of %q", it.ID, it.Fingerprint.Content)
			}
		}
	})
}
