package webhook_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/pkg/webhook"
)

// adyenKey and the first item of testdata/sdk/adyen_items.json are the test
// vector of Adyen/adyen-go-api-library src/hmacvalidator/hmacvalidator_test.go
// (key, notificationRequestItem, expectedSign
// "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="); the notification holding it
// and a second item was signed by @adyen/api-library@32.1.0's HmacValidator
// (testdata/sdk/generate.js), which gives the first item that same signature.
const adyenKey = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"

func adyenRequest(body []byte) webhook.Request {
	return webhook.Request{Header: hdr(map[string]string{"content-type": "application/json"}), Body: body}
}

// TestAdyenPublishedTestNotificationIsAcceptedItemByItem: the notification of
// Adyen's published SDK test verifies item by item, each keyed on its signed
// fields and answered [accepted] once for all.
func TestAdyenPublishedTestNotificationIsAcceptedItemByItem(t *testing.T) {
	body := readFixture(t, "sdk/adyen_items.json")
	if !bytes.Contains(body, []byte(`"hmacSignature": "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="`)) {
		t.Fatal("the fixture's first item does not carry adyen-go-api-library's expectedSign")
	}
	v := presetVerifier(t, "adyen", strings.ToLower(adyenKey))
	r := adyenRequest(body)
	d, err := v.Verify(r)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if d.Answer == nil || string(d.Answer.Body) != "[accepted]" || d.ID != "" || d.Handshake != nil {
		t.Fatalf("Event = %+v, want items answered [accepted]", d)
	}
	checkAdyenItems(t, d.Items, []adyenItem{
		{"pspReference|EVENT", "EVENT", "originalReference"},
		{"QFQTPCQ8HXSKGK82|CAPTURE", "CAPTURE", "pspReference"},
	})
	// The fingerprint is the signed data, as adyen-go-api-library's
	// GetDataToSign writes it ("Get correct data to sign").
	if d.Items[0].Fingerprint != sha256.Sum256([]byte("pspReference:originalReference:merchantAccount:reference:1000:EUR:EVENT:true")) {
		t.Errorf("fingerprint %x, not of the signed data", d.Items[0].Fingerprint)
	}
	// Unsigned fields may change without changing the key or the fingerprint.
	r2 := adyenRequest(bytes.Replace(body, []byte(`"reason": "reason"`), []byte(`"reason": "other"`), 1))
	d2, err := v.Verify(r2)
	if err != nil {
		t.Fatalf("unsigned reason changed: %v", err)
	}
	if d2.Items[0].ID != d.Items[0].ID || d2.Items[0].Fingerprint != d.Items[0].Fingerprint {
		t.Errorf("an unsigned change moved the key or fingerprint: %+v", d2.Items[0])
	}
}

// adyenItem is what an accepted item is expected to report.
type adyenItem struct{ id, typ, object string }

// checkAdyenItems checks that items are want, in order, each with its
// NotificationRequestItem as payload and that payload reported unsigned.
func checkAdyenItems(t *testing.T, items []webhook.Delivery, want []adyenItem) {
	t.Helper()
	if len(items) != len(want) {
		t.Fatalf("%d items, want %d", len(items), len(want))
	}
	for i, w := range want {
		it := items[i]
		if it.ID != w.id || it.Type != w.typ || it.ObjectID != w.object || !slices.Equal(it.Unsigned, []string{"payload"}) {
			t.Errorf("item %d = %+v, want %+v", i, it, w)
		}
		if !bytes.HasPrefix(bytes.TrimSpace(it.Payload), []byte("{")) || !bytes.Contains(it.Payload, []byte(`"pspReference"`)) {
			t.Errorf("item %d payload %s, want its NotificationRequestItem", i, it.Payload)
		}
	}
}

func TestAdyenDeliveryWithOneBadItemIsRefusedWhole(t *testing.T) {
	body := readFixture(t, "sdk/adyen_items.json")
	v := presetVerifier(t, "adyen", adyenKey)
	for _, tc := range []struct {
		name      string
		from, to  string
		want      error
		wantInMsg string
	}{
		{"second item's event code", `"eventCode": "CAPTURE"`, `"eventCode": "REFUND"`, webhook.ErrNoValidSignature, "item 2 of 2"},
		{"first item's success", `"success": "true"`, `"success": "false"`, webhook.ErrNoValidSignature, "item 1 of 2"},
		{"signature removed", `"hmacSignature": "rtMaqdHJ/mcbJaLTcU6e25fq7ysF4Mza1LN7C2AcrHI="`, `"x": "y"`, webhook.ErrNotSigned, "item 2"},
		{"signature not base64", `"hmacSignature": "rtMaqdHJ`, `"hmacSignature": "!tMaqdHJ`, webhook.ErrInvalidHeader, "item 2"},
		{"pspReference twice", `"pspReference": "QFQTPCQ8HXSKGK82",`, `"pspReference": "QFQTPCQ8HXSKGK82", "pspReference": "other",`, webhook.ErrBadPayload, "more than once"},
		{"value not an integer", `"value": 1000`, `"value": 1e3`, webhook.ErrBadPayload, "integer"},
		{"success a boolean", `"success": "true"`, `"success": true`, webhook.ErrBadPayload, "not a string"},
	} {
		tampered := bytes.Replace(body, []byte(tc.from), []byte(tc.to), 1)
		if bytes.Equal(tampered, body) {
			t.Fatalf("%s: the fixture does not hold %q", tc.name, tc.from)
		}
		_, err := v.Verify(adyenRequest(tampered))
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantInMsg) {
			t.Errorf("%s: Verify = %v, want %v mentioning %q", tc.name, err, tc.want, tc.wantInMsg)
		}
	}
	for name, b := range map[string]string{
		"not JSON":       `[accepted]`,
		"no items":       `{"live":"false","notificationItems":[]}`,
		"items not list": `{"live":"false","notificationItems":{}}`,
		"no wrapper":     `{"notificationItems":[{"pspReference":"x"}]}`,
		"101 items":      `{"notificationItems":[` + strings.Repeat(`{"NotificationRequestItem":{}},`, 100) + `{"NotificationRequestItem":{}}]}`,
	} {
		if _, err := v.Verify(adyenRequest([]byte(b))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Another key refuses the genuine notification.
	if _, err := presetVerifier(t, "adyen", "00"+adyenKey[2:]).Verify(adyenRequest(body)); !errors.Is(err, webhook.ErrNoValidSignature) {
		t.Errorf("other key: %v", err)
	}
	// A key that is not hex cannot be configured.
	p, _ := preset.Lookup("adyen")
	if _, err := webhook.NewVerifier(p, []string{"not-hex"}, 0); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("NewVerifier(not hex) = %v, want ErrInvalidSecret", err)
	}
}

// BenchmarkVerifyAdyenNotification verifies the two-item test notification.
func BenchmarkVerifyAdyenNotification(b *testing.B) {
	v := presetVerifier(b, "adyen", adyenKey)
	r := adyenRequest(readFixture(b, "sdk/adyen_items.json"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(r); err != nil {
			b.Fatal(err)
		}
	}
}
