package webhooktest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// signItems signs every notification item of an Adyen body as Adyen does:
// additionalData.hmacSignature is the base64 HMAC-SHA256, under the
// hex-decoded key, of pspReference, originalReference, merchantAccountCode,
// merchantReference, amount.value, amount.currency, eventCode and success
// joined with ":" (an absent field signed as empty). The body is re-encoded.
func signItems(secret string, r webhook.Request) (webhook.Request, error) {
	key, err := hex.DecodeString(secret)
	if err != nil {
		return webhook.Request{}, fmt.Errorf("webhooktest: an Adyen HMAC key is hex: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	var body map[string]any
	if err := dec.Decode(&body); err != nil {
		return webhook.Request{}, fmt.Errorf("webhooktest: adyen body: %w", err)
	}
	list, _ := body["notificationItems"].([]any)
	for n, entry := range list {
		wrapper, _ := entry.(map[string]any)
		item, _ := wrapper["NotificationRequestItem"].(map[string]any)
		if item == nil {
			return webhook.Request{}, fmt.Errorf("webhooktest: adyen item %d has no NotificationRequestItem", n+1)
		}
		amount, _ := item["amount"].(map[string]any)
		text := func(m map[string]any, name string) string {
			switch v := m[name].(type) {
			case string:
				return v
			case json.Number:
				return v.String()
			}
			return ""
		}
		data := strings.Join([]string{
			text(item, "pspReference"), text(item, "originalReference"), text(item, "merchantAccountCode"),
			text(item, "merchantReference"), text(amount, "value"), text(amount, "currency"),
			text(item, "eventCode"), text(item, "success"),
		}, ":")
		m := hmac.New(sha256.New, key)
		m.Write([]byte(data))
		extra, _ := item["additionalData"].(map[string]any)
		if extra == nil {
			extra = map[string]any{}
		}
		extra["hmacSignature"] = base64.StdEncoding.EncodeToString(m.Sum(nil))
		item["additionalData"] = extra
	}
	b, err := json.Marshal(body)
	if err != nil {
		return webhook.Request{}, err
	}
	r.Body = b
	return r, nil
}

// sampleAdyen is a standard notification of one AUTHORISATION item, shaped
// as Adyen's test notification: pspReference is id, or the part of id
// before its last "|" with the event code after it.
func sampleAdyen(id string, now time.Time) ([]byte, map[string]string) {
	psp, code := id, "AUTHORISATION"
	if i := strings.LastIndexByte(id, '|'); i >= 0 {
		psp, code = id[:i], id[i+1:]
	}
	return mustJSON(map[string]any{
		"live": "false",
		"notificationItems": []any{map[string]any{"NotificationRequestItem": map[string]any{
			"additionalData":      map[string]any{"authCode": "1234", "cardSummary": "7777", "expiryDate": "12/2030"},
			"amount":              map[string]any{"currency": "EUR", "value": 1000},
			"eventCode":           code,
			"eventDate":           now.UTC().Format(time.RFC3339),
			"merchantAccountCode": "YourMerchantAccount",
			"merchantReference":   "order-" + derived("ref"+id, 8),
			"operations":          []any{"CANCEL", "CAPTURE", "REFUND"},
			"paymentMethod":       "visa",
			"pspReference":        psp,
			"reason":              "1234:7777:12/2030",
			"success":             "true",
		}}},
	}), nil
}
