package webhook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/preset"
)

// FuzzNotificationItems: parseNotificationItems, the reader of Adyen's
// untrusted bodies, never panics, accepts only JSON, bounds the items, and
// yields for each one a 32-byte signature and eight signed fields.
func FuzzNotificationItems(f *testing.F) {
	f.Add([]byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="},"amount":{"currency":"EUR","value":1000},"eventCode":"EVENT","merchantAccountCode":"merchantAccount","merchantReference":"reference","originalReference":"originalReference","pspReference":"pspReference","success":"true"}}]}`))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"amount":{"value":-0},"additionalData":{"hmacSignature":null}}}]}`))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"pspReference":"a","pspReference":"b"}}]}`))
	f.Add([]byte(`{"notificationItems":null}`))
	f.Add([]byte(`[accepted]`))
	f.Add([]byte(`{"notificationItems":[{"NotificationRequestItem":{"pspReference":"\ud800","amount":{"value":1}}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		items, err := parseNotificationItems(body)
		if err != nil {
			if !errors.Is(err, ErrBadPayload) && !errors.Is(err, ErrNotSigned) && !errors.Is(err, ErrInvalidHeader) {
				t.Fatalf("error outside the sentinels: %v", err)
			}
			if len(err.Error()) > 4*maxQuoted {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if !json.Valid(body) || len(items) == 0 || len(items) > maxNotificationItems {
			t.Fatalf("accepted %d items from %q", len(items), body)
		}
		for _, it := range items {
			if len(it.signature) != 32 || !json.Valid(it.raw) {
				t.Fatalf("item %+v", it)
			}
			if v := it.fields[itemValue]; v == "" || strings.ContainsAny(v, ".eE+") {
				t.Fatalf("amount.value signed as %q", v)
			}
		}
	})
}

// FuzzTwilioSignatureSettings: the reader of Twilio's settings header never
// panics, yields HMAC-SHA1 or HMAC-SHA256 or ErrInvalidHeader, and falls back
// to the preset's algorithm when no algorithm is named.
func FuzzTwilioSignatureSettings(f *testing.F) {
	f.Add("key=webhooks_sharedkey_01,algorithm=HMAC_SHA256")
	f.Add(" algorithm = hmac_sha1 ")
	f.Add("algorithm=,algorithm=HMAC_SHA512")
	f.Add("key=k")
	f.Add("")
	f.Add(strings.Repeat("algorithm=x,", 200))
	f.Fuzz(func(t *testing.T, value string) {
		alg, err := twilioSignatureAlgorithm(value, preset.SHA1)
		if err != nil {
			if !errors.Is(err, ErrInvalidHeader) || len(err.Error()) > 4*maxQuoted {
				t.Fatalf("error %v", err)
			}
			return
		}
		if alg != preset.SHA1 && alg != preset.SHA256 {
			t.Fatalf("algorithm %q from %q", alg, value)
		}
		if !strings.Contains(value, "algorithm") && alg != preset.SHA1 {
			t.Fatalf("%q names no algorithm but gave %q", value, alg)
		}
	})
}
