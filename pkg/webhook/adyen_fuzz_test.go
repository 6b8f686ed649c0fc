package webhook_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idemlambda/idem/pkg/webhook"
)

// FuzzAdyenVerify: whatever the body, a notification the verifier accepts
// has, in every item it returns, a signature that is the HMAC-SHA256 under
// the key of the item's eight signed fields as the SDKs join them, and a
// fingerprint that is their SHA-256; both checked here with the standard
// library, apart from the verifier. So nothing unsigned reaches a key.
func FuzzAdyenVerify(f *testing.F) {
	f.Add(readFixture(f, "sdk/adyen_items.json"))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"pspReference":"p","eventCode":"E","amount":{"value":1,"currency":"EUR"},"additionalData":{"hmacSignature":"ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="}}}]}`))
	key, _ := hex.DecodeString(adyenKey)
	v := presetVerifier(f, "adyen", adyenKey)
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := v.Verify(adyenRequest(body))
		if err != nil {
			if errors.Is(err, webhook.ErrBadPayload) || errors.Is(err, webhook.ErrNoEventID) || errors.Is(err, webhook.ErrNoValidSignature) ||
				errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrInvalidHeader) {
				return
			}
			t.Fatalf("Verify error outside the sentinels: %v", err)
		}
		if len(d.Items) == 0 || d.Answer == nil {
			t.Fatalf("accepted %q without items", body)
		}
		for _, it := range d.Items {
			checkAdyenItem(t, key, it)
		}
	})
}

// checkAdyenItem checks, reading its payload by Adyen's exact member names
// as its SDKs do, that the item's hmacSignature is the HMAC of its signed
// fields and that its fingerprint and key are of those fields.
func checkAdyenItem(t *testing.T, key []byte, it webhook.Delivery) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(it.Payload))
	dec.UseNumber()
	var item map[string]any
	if err := dec.Decode(&item); err != nil {
		t.Fatalf("payload %q: %v", it.Payload, err)
	}
	amount, _ := item["amount"].(map[string]any)
	extra, _ := item["additionalData"].(map[string]any)
	data := strings.Join([]string{adyenText(item, "pspReference"), adyenText(item, "originalReference"), adyenText(item, "merchantAccountCode"),
		adyenText(item, "merchantReference"), adyenText(amount, "value"), adyenText(amount, "currency"), adyenText(item, "eventCode"), adyenText(item, "success")}, ":")
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	if base64.StdEncoding.EncodeToString(m.Sum(nil)) != adyenText(extra, "hmacSignature") {
		t.Fatalf("item %s accepted with a signature that is not the HMAC of %q", it.ID, data)
	}
	if it.Fingerprint != sha256.Sum256([]byte(data)) || it.ID != adyenText(item, "pspReference")+"|"+adyenText(item, "eventCode") {
		t.Fatalf("item %s: fingerprint or key not of its signed fields %q", it.ID, data)
	}
}

// adyenText is the member name of m as text: a string, or a number as written.
func adyenText(m map[string]any, name string) string {
	switch x := m[name].(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}
