package webhooktest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The samples of the original five senders, shaped as each sends them.

// stripeAPIVersion is the API version Stripe samples claim: stripe-go v82's.
const stripeAPIVersion = "2025-08-27.basil"

// shopifyAPIVersion is the Admin API version Shopify samples claim.
const shopifyAPIVersion = "2025-07"

func init() {
	samples["stripe"] = sampleStripe
	samples["github"] = sampleGithub
	samples["shopify"] = sampleShopify
	samples["slack"] = sampleSlack
	samples["standard"] = sampleStandard
}

// sampleStripe is a payment_intent.succeeded event, pretty-printed as Stripe sends it.
func sampleStripe(eventID string, now time.Time) ([]byte, map[string]string) {
	created := now.Unix()
	intent := derivedID("pi_3Q", eventID, 20)
	body := map[string]any{
		"id":          eventID,
		"object":      "event",
		"api_version": stripeAPIVersion,
		"created":     created,
		"data": map[string]any{
			"object": map[string]any{
				"id":                   intent,
				"object":               "payment_intent",
				"amount":               2000,
				"amount_received":      2000,
				"currency":             "usd",
				"status":               "succeeded",
				"capture_method":       "automatic",
				"client_secret":        intent + "_secret_" + derivedID("", "secret"+eventID, 24),
				"created":              created - 3,
				"latest_charge":        derivedID("ch_3Q", eventID, 20),
				"livemode":             false,
				"metadata":             map[string]any{"order_id": derivedID("ord_", eventID, 12)},
				"payment_method":       derivedID("pm_1Q", eventID, 20),
				"payment_method_types": []string{"card"},
			},
		},
		"livemode":         false,
		"pending_webhooks": 1,
		"request": map[string]any{
			"id":              derivedID("req_", eventID, 14),
			"idempotency_key": derivedID("", "key"+eventID, 32),
		},
		"type": "payment_intent.succeeded",
	}
	return mustJSONIndent(body), map[string]string{
		"content-type": "application/json; charset=utf-8",
		"user-agent":   "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
		"accept":       "*/*; q=0.5, application/xml",
	}
}

// sampleGithub is a push event, compact as GitHub sends it, with the headers GitHub
// sets; eventID becomes the delivery GUID.
func sampleGithub(eventID string, now time.Time) ([]byte, map[string]string) {
	const (
		owner = "idemlambda"
		repo  = "demo"
	)
	before := derivedID("", "before"+eventID, 40)
	after := derivedID("", "after"+eventID, 40)
	pushedAt := now.UTC().Format(time.RFC3339)
	user := map[string]any{
		"login": "octocat", "id": 583231, "type": "User",
		"html_url": "https://github.com/octocat",
	}
	body := map[string]any{
		"ref":         "refs/heads/main",
		"before":      before,
		"after":       after,
		"created":     false,
		"deleted":     false,
		"forced":      false,
		"compare":     fmt.Sprintf("https://github.com/%s/%s/compare/%s...%s", owner, repo, before[:12], after[:12]),
		"commits":     []any{map[string]any{"id": after, "message": "Update README.md", "timestamp": pushedAt, "author": map[string]any{"name": "The Octocat", "username": "octocat"}, "added": []string{}, "removed": []string{}, "modified": []string{"README.md"}}},
		"pusher":      map[string]any{"name": "octocat", "email": "octocat@github.com"},
		"sender":      user,
		"head_commit": map[string]any{"id": after, "message": "Update README.md", "timestamp": pushedAt},
		"repository": map[string]any{
			"id":             702418393,
			"node_id":        "R_kgDOKd3P2Q",
			"name":           repo,
			"full_name":      owner + "/" + repo,
			"private":        true,
			"owner":          map[string]any{"login": owner, "id": 139426, "type": "Organization"},
			"html_url":       "https://github.com/" + owner + "/" + repo,
			"default_branch": "main",
			"pushed_at":      now.Unix(),
		},
		"organization": map[string]any{"login": owner, "id": 139426},
	}
	return mustJSON(body), map[string]string{
		"content-type":                           "application/json",
		"user-agent":                             "GitHub-Hookshot/" + derivedID("", "hookshot", 7),
		"x-github-delivery":                      eventID,
		"x-github-event":                         "push",
		"x-github-hook-id":                       "498251737",
		"x-github-hook-installation-target-id":   "702418393",
		"x-github-hook-installation-target-type": "repository",
	}
}

// sampleShopify is an orders/create delivery with the headers Shopify sets; eventID
// becomes the webhook id.
func sampleShopify(eventID string, now time.Time) ([]byte, map[string]string) {
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
	return mustJSON(body), map[string]string{
		"content-type":           "application/json",
		"user-agent":             "Shopify-Captain-Hook",
		"x-shopify-topic":        "orders/create",
		"x-shopify-shop-domain":  shop,
		"x-shopify-webhook-id":   eventID,
		"x-shopify-event-id":     derivedUUID("event" + eventID),
		"x-shopify-api-version":  shopifyAPIVersion,
		"x-shopify-triggered-at": now.UTC().Format("2006-01-02T15:04:05.000000000Z"),
		"x-shopify-order-id":     orderID,
	}
}

// sampleSlack is an event_callback carrying a message event; eventID becomes the
// event_id.
func sampleSlack(eventID string, now time.Time) ([]byte, map[string]string) {
	const (
		team    = "T0001IDEM"
		channel = "C0001DEMO"
		app     = "A0001IDEM"
	)
	ts := fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
	body := map[string]any{
		"token":      "Jhj5dZrVaK7ZwHHjRyZWjbDl",
		"team_id":    team,
		"api_app_id": app,
		"event": map[string]any{
			"type":         "message",
			"channel":      channel,
			"channel_type": "channel",
			"user":         "U2147483697",
			"text":         "Live long and prosper.",
			"ts":           ts,
			"event_ts":     ts,
		},
		"type":       "event_callback",
		"event_id":   eventID,
		"event_time": now.Unix(),
		"authorizations": []any{map[string]any{
			"team_id": team, "user_id": "U0001BOT", "is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false,
		"event_context":         derivedID("4-", eventID, 40),
	}
	return mustJSON(body), map[string]string{
		"content-type": "application/json",
		"user-agent":   "Slackbot 1.0 (+https://api.slack.com/robots)",
	}
}

// sampleStandard is an invoice.paid message in the Standard Webhooks payload shape
// (type, timestamp, data); it repeats eventID as the top-level id so that
// Sign signs it under that message id.
func sampleStandard(eventID string, now time.Time) ([]byte, map[string]string) {
	body := map[string]any{
		"id":        eventID,
		"type":      "invoice.paid",
		"timestamp": now.UTC().Format("2006-01-02T15:04:05.000000Z"),
		"data": map[string]any{
			"id":          derivedID("inv_", eventID, 24),
			"customer_id": derivedID("cus_", eventID, 14),
			"amount":      4900,
			"currency":    "eur",
			"status":      "paid",
		},
	}
	return mustJSON(body), map[string]string{
		"content-type": "application/json",
		"user-agent":   "Svix-Webhooks/1.44.0",
		"webhook-id":   eventID,
	}
}

// derivedID returns a stable identifier made from seed: prefix followed by
// n hex characters of its SHA-256. Samples use it so that one event id always
// yields the same object ids.
func derivedID(prefix, seed string, n int) string {
	sum := sha256.Sum256([]byte(seed))
	return prefix + hex.EncodeToString(sum[:])[:n]
}

// derivedUUID is derivedID shaped as a version 4 UUID.
func derivedUUID(seed string) string {
	h := derivedID("", seed, 32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// derivedNumber is derivedID for senders whose ids are decimal numbers.
func derivedNumber(seed string, digits int) string {
	sum := sha256.Sum256([]byte(seed))
	var b strings.Builder
	b.WriteByte('1' + sum[0]%9)
	for i := 1; i < digits; i++ {
		b.WriteByte('0' + sum[i%len(sum)]%10)
	}
	return b.String()
}

// mustJSONIndent is mustJSON, pretty-printed as Stripe sends its events.
func mustJSONIndent(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic("webhooktest: sample body: " + err.Error())
	}
	return b
}
