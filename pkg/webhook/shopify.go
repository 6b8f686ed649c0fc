package webhook

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// Shopify signs each delivery in the X-Shopify-Hmac-Sha256 header:
//
//	x-shopify-hmac-sha256: Ru+S2Z/XhV5TOreFA6IMwMitMIrG3yqgW/OCVAoYj6I=
//
// the standard base64 HMAC-SHA256 of the raw body keyed with the app's client
// secret (or the webhook signing secret shown in the admin). Only the body is
// signed: not a timestamp, not X-Shopify-Webhook-Id (the delivery id every
// retry keeps; X-Shopify-Event-Id stands in when it is absent), not
// X-Shopify-Topic. Replay protection therefore rests on deduplicating the body
// itself: its digest is the deduplication key (BodyDigestID), which a retry,
// byte for byte the same body, keeps, and no header can change.
const (
	// ShopifyHMACHeader is the header carrying Shopify's signature.
	ShopifyHMACHeader = "x-shopify-hmac-sha256"
	// ShopifyWebhookIDHeader carries the delivery id, unsigned: Event.DeliveryID.
	ShopifyWebhookIDHeader = "x-shopify-webhook-id"
	// ShopifyEventIDHeader carries the event id, unsigned: Event.DeliveryID
	// when ShopifyWebhookIDHeader is absent.
	ShopifyEventIDHeader = "x-shopify-event-id"
	// ShopifyTopicHeader carries the topic ("orders/create", ...).
	ShopifyTopicHeader = "x-shopify-topic"
	// ShopifyShopDomainHeader carries the shop's myshopify.com domain.
	ShopifyShopDomainHeader = "x-shopify-shop-domain"
	// ShopifyResultTTL is how long a completed Shopify result is kept: above
	// Shopify's retry schedule (48 hours under its older policy).
	ShopifyResultTTL = 72 * time.Hour
)

// ShopifyHMAC returns the x-shopify-hmac-sha256 header value Shopify sends
// with body signed with secret: base64 of HMAC-SHA256(secret, body).
func ShopifyHMAC(secret string, body []byte) string {
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), body))
}

type shopifyProvider struct {
	secrets [][]byte
}

func newShopify(c config) (Provider, error) {
	p := &shopifyProvider{}
	for _, s := range c.secrets {
		p.secrets = append(p.secrets, []byte(s))
	}
	return p, nil
}

func (p *shopifyProvider) Name() string { return "shopify" }

func (p *shopifyProvider) DefaultResultTTL() time.Duration { return ShopifyResultTTL }

// parseShopifyHMAC parses the canonical padded base64 of a 32-byte tag.
func parseShopifyHMAC(v string) ([]byte, error) {
	if v == "" {
		return nil, fmt.Errorf("%w: no %s header", ErrNotSigned, ShopifyHMACHeader)
	}
	sig, ok := decodeBase64MAC(v)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a base64 HMAC-SHA256", ErrInvalidHeader, ShopifyHMACHeader)
	}
	return sig, nil
}

// Verify checks x-shopify-hmac-sha256 against every secret.
func (p *shopifyProvider) Verify(headers map[string]string, body []byte, _ time.Time) error {
	sig, err := parseShopifyHMAC(header(headers, ShopifyHMACHeader))
	if err != nil {
		return err
	}
	for _, secret := range p.secrets {
		if hmac.Equal(hmacSHA256(secret, body), sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: checked against %d secret(s)", ErrNoValidSignature, len(p.secrets))
}

// Event derives the deduplication key from the signed body (BodyDigestID),
// takes the delivery id and topic from the unsigned headers, and the resource
// id from the body's id (or admin_graphql_api_id).
func (p *shopifyProvider) Event(headers map[string]string, body []byte) (Event, error) {
	obj, err := decodeObject(body)
	if err != nil {
		return Event{}, err
	}
	ev := Event{
		ID:         BodyDigestID(body),
		DeliveryID: header(headers, ShopifyWebhookIDHeader),
		Type:       header(headers, ShopifyTopicHeader),
		Unsigned:   FieldDeliveryID | FieldType,
	}
	if ev.DeliveryID == "" {
		ev.DeliveryID = header(headers, ShopifyEventIDHeader)
	}
	if ev.DeliveryID == "" {
		return Event{}, fmt.Errorf("%w: neither %s nor %s is set", ErrNoEventID, ShopifyWebhookIDHeader, ShopifyEventIDHeader)
	}
	ev.ObjectID = obj.id("id")
	if ev.ObjectID == "" {
		ev.ObjectID = obj.str("admin_graphql_api_id")
	}
	return ev, nil
}

func (p *shopifyProvider) Sign(secret string, body []byte, _ time.Time) map[string]string {
	return map[string]string{ShopifyHMACHeader: ShopifyHMAC(secret, body)}
}

// shopifyAPIVersion is the Admin API version samples claim.
const shopifyAPIVersion = "2025-07"

// Sample is an orders/create delivery with the headers Shopify sets; eventID
// becomes the webhook id.
func (p *shopifyProvider) Sample(eventID string, now time.Time) ([]byte, map[string]string) {
	const shop = "idem-demo.myshopify.com"
	orderID := derivedNumber("order"+eventID, 13)
	created := now.Format(time.RFC3339)
	body := map[string]any{
		"id":                   json.Number(orderID),
		"admin_graphql_api_id": "gid://shopify/Order/" + orderID,
		"name":                 "#" + derivedNumber("name"+eventID, 4),
		"email":                "jon@example.com",
		"created_at":           created,
		"updated_at":           created,
		"currency":             "USD",
		"financial_status":     "paid",
		"fulfillment_status":   nil,
		"subtotal_price":       "199.00",
		"total_tax":            "0.00",
		"total_price":          "199.00",
		"test":                 false,
		"token":                derivedID("", "token"+eventID, 32),
		"source_name":          "web",
		"line_items": []any{map[string]any{
			"id":         json.Number(derivedNumber("line"+eventID, 14)),
			"product_id": json.Number("632910392"),
			"title":      "IPod Nano - 8GB",
			"quantity":   1,
			"price":      "199.00",
			"sku":        "IPOD2008PINK",
		}},
	}
	return mustJSON(body, false), map[string]string{
		"content-type":           "application/json",
		"user-agent":             "Shopify-Captain-Hook",
		ShopifyTopicHeader:       "orders/create",
		ShopifyShopDomainHeader:  shop,
		ShopifyWebhookIDHeader:   eventID,
		ShopifyEventIDHeader:     derivedUUID("event" + eventID),
		"x-shopify-api-version":  shopifyAPIVersion,
		"x-shopify-triggered-at": now.UTC().Format("2006-01-02T15:04:05.000000000Z"),
		"x-shopify-order-id":     orderID,
	}
}
