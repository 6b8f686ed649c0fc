package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

type shopifyVector struct {
	Name, Secret, Body, HMAC string
	BodyFile                 string `json:"body_file"`
}

func shopifyVectors(t *testing.T) []shopifyVector {
	var f struct{ Vectors []shopifyVector }
	readJSONFixture(t, "shopify_known_answer.json", &f)
	if len(f.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for i, v := range f.Vectors {
		if v.BodyFile != "" {
			f.Vectors[i].Body = string(readFixture(t, v.BodyFile))
		}
	}
	return f.Vectors
}

// TestShopifyKnownAnswers checks the documented scheme against answers
// computed outside Go, then the package against the same answers.
func TestShopifyKnownAnswers(t *testing.T) {
	for _, v := range shopifyVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			body := []byte(v.Body)
			mac := hmac.New(sha256.New, []byte(v.Secret))
			mac.Write(body)
			if got := base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != v.HMAC {
				t.Fatalf("fixture disagrees with crypto/hmac: %q vs %q", v.HMAC, got)
			}
			if got := webhooktest.ShopifyHMAC(v.Secret, body); got != v.HMAC {
				t.Fatalf("ShopifyHMAC = %q, want %q", got, v.HMAC)
			}
			p := mustNew(t, "shopify", v.Secret)
			if err := p.CheckSignature(shopifyHeader(v.HMAC), body, testNow); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			wantErr(t, p.CheckSignature(shopifyHeader(v.HMAC), append(body, '\n'), testNow), webhook.ErrNoValidSignature)
			wantErr(t, mustNew(t, "shopify", v.Secret+"x").CheckSignature(shopifyHeader(v.HMAC), body, testNow), webhook.ErrNoValidSignature)
		})
	}
}

func TestShopifyAcceptsOnlyCanonicalBase64(t *testing.T) {
	v := shopifyVectors(t)[0] // its HMAC holds both '+' and '/'
	if !strings.ContainsAny(v.HMAC, "+/") {
		t.Fatal("fixture no longer exercises the URL-safe alphabet")
	}
	p := mustNew(t, "shopify", v.Secret)
	body := []byte(v.Body)
	raw, _ := base64.StdEncoding.DecodeString(v.HMAC)

	// Same last character class but non-zero padding bits: decodes to the
	// same MAC under a lenient decoder.
	last := strings.IndexByte(base64Alphabet, v.HMAC[42])
	nonCanonical := v.HMAC[:42] + string(base64Alphabet[last^1]) + "="
	if lenient, err := base64.StdEncoding.DecodeString(nonCanonical); err != nil || string(lenient) != string(raw) {
		t.Fatalf("%q should decode leniently to the same MAC", nonCanonical)
	}

	for _, tc := range []struct {
		name, header string
		want         error
	}{
		{"missing", "", webhook.ErrNotSigned},
		{"hex instead of base64", hex.EncodeToString(raw), webhook.ErrInvalidHeader},
		{"unpadded", strings.TrimRight(v.HMAC, "="), webhook.ErrInvalidHeader},
		{"URL-safe alphabet", base64.URLEncoding.EncodeToString(raw), webhook.ErrInvalidHeader},
		{"line break inside", v.HMAC[:20] + "\n" + v.HMAC[20:], webhook.ErrInvalidHeader},
		{"line break instead of padding", v.HMAC[:43] + "\n", webhook.ErrInvalidHeader},
		{"trailing space", v.HMAC + " ", webhook.ErrInvalidHeader},
		{"truncated MAC", base64.StdEncoding.EncodeToString(raw[:31]), webhook.ErrInvalidHeader},
		{"longer MAC", base64.StdEncoding.EncodeToString(append(raw, 0)), webhook.ErrInvalidHeader},
		{"non-canonical padding bits", nonCanonical, webhook.ErrInvalidHeader},
		{"sha256= prefix", "sha256=" + v.HMAC, webhook.ErrInvalidHeader},
		{"two values", v.HMAC + "," + v.HMAC, webhook.ErrInvalidHeader},
		{"another MAC", webhooktest.ShopifyHMAC(v.Secret, []byte("{}")), webhook.ErrNoValidSignature},
	} {
		err := p.CheckSignature(shopifyHeader(tc.header), body, testNow)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s (%q): error = %v, want %v", tc.name, tc.header, err, tc.want)
		}
	}
}

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

func TestShopifyEventTakesWebhookIDTopicAndResourceID(t *testing.T) {
	p := mustNew(t, "shopify", shopifySecret)
	body := readFixture(t, "events/shopify_orders_create.json")
	headers := map[string]string{
		"x-shopify-webhook-id":  "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
		"x-shopify-event-id":    "98880550-7158-44d4-b7cd-2c97c8a091b5",
		"x-shopify-topic":       "orders/create",
		"x-shopify-shop-domain": "shop.myshopify.com",
	}
	// 820982911946154508 is beyond float64 precision: it must survive exactly.
	want := event{
		ID:         bodyDigest(body),
		DeliveryID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", Type: "orders/create", ObjectID: "820982911946154508",
		Unsigned: []string{"delivery_id", "type"},
	}
	if got, err := p.Event(headers, body); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Event = %+v, %v; want %+v", got, err, want)
	}

	delete(headers, "x-shopify-webhook-id")
	if got, err := p.Event(headers, body); err != nil || got.DeliveryID != "98880550-7158-44d4-b7cd-2c97c8a091b5" || got.ID != want.ID {
		t.Fatalf("fallback to the event id: %+v, %v", got, err)
	}
	delete(headers, "x-shopify-event-id")
	_, err := p.Event(headers, body)
	wantErr(t, err, webhook.ErrNoEventID)

	headers["x-shopify-webhook-id"] = "w1"
	for body, objectID := range map[string]string{
		`{"id":"gid-as-string"}`:                          "gid-as-string",
		`{"admin_graphql_api_id":"gid://shopify/Shop/1"}`: "gid://shopify/Shop/1",
		`{"shop_id":954889,"shop_domain":"x"}`:            "",
		`{"id":true}`:                                     "",
		`{"id":1.5e3}`:                                    "1.5e3",
	} {
		got, err := p.Event(headers, []byte(body))
		if err != nil || got.ObjectID != objectID {
			t.Errorf("%s: Event = %+v, %v; want object %q", body, got, err, objectID)
		}
	}
}
