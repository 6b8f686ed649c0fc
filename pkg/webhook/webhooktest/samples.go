package webhooktest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// Sample returns an unsigned delivery of the sender called name, shaped like the
// sender's own: the body and the headers other than the signature (content
// type, event type, message id). eventID is the event's id: the Event.ID a
// webhook.Delivery.ID is when the sender signs an id, else a value inside the body,
// so different eventIDs give different digest ids. Sign it with Sign; a URL
// scheme needs Request.URL set first.
func Sample(name, eventID string, now time.Time) (webhook.Request, error) {
	build, ok := samples[name]
	if !ok {
		return webhook.Request{}, fmt.Errorf("webhooktest: no sample for %q", name)
	}
	body, headers := build(eventID, now)
	h := make(http.Header, len(headers)+1)
	for k, v := range headers {
		h.Set(k, v)
	}
	if h.Get("content-type") == "" {
		h.Set("content-type", "application/json")
	}
	return webhook.Request{Body: body, Header: h, Method: "POST", Now: now}, nil
}

// derived returns n hex digits derived from seed, for stable sample ids.
func derived(seed string, n int) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])[:n]
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("webhooktest: sample body: " + err.Error())
	}
	return b
}

type sampleFunc func(eventID string, now time.Time) ([]byte, map[string]string)

var samples = map[string]sampleFunc{
	"twilio": func(id string, now time.Time) ([]byte, map[string]string) {
		form := url.Values{
			"AccountSid":    {"AC" + derived("acct", 32)},
			"MessageSid":    {id},
			"SmsSid":        {id},
			"MessageStatus": {"delivered"},
			"From":          {"+14158675309"},
			"To":            {"+18005551212"},
			"ApiVersion":    {"2010-04-01"},
		}
		return []byte(form.Encode()), map[string]string{"content-type": "application/x-www-form-urlencoded"}
	},
	"square": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"merchant_id": "MLEFBHHSJGVHD", "type": "payment.updated", "event_id": id,
			"created_at": now.UTC().Format(time.RFC3339Nano),
			"data":       map[string]any{"type": "payment", "id": derived("pay"+id, 22), "object": map[string]any{"payment": map[string]any{"status": "COMPLETED"}}},
		}), nil
	},
	"paddle": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"event_id": id, "event_type": "transaction.completed", "occurred_at": now.UTC().Format(time.RFC3339Nano),
			"notification_id": "ntf_" + derived("ntf"+id, 26),
			"data":            map[string]any{"id": "txn_" + derived("txn"+id, 26), "status": "completed", "currency_code": "EUR"},
		}), nil
	},
	"discord": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"id": id, "application_id": "787053080478613550", "type": 2, "version": 1,
			"token": "ThisIsATokenFromDiscordThatIsVeryLong",
			"data":  map[string]any{"id": "787053080478613554", "name": "test", "type": 1},
		}), nil
	},
	"zoom": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"event": "meeting.started", "event_ts": now.UnixMilli(),
			"payload": map[string]any{"account_id": "AAAAAABBBB", "object": map[string]any{"id": id, "uuid": derived("uuid"+id, 22), "topic": "My Meeting", "type": 2}},
		}), nil
	},
	"twitch": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
				"subscription": map[string]any{"id": "f1c2a387-161a-49f9-a165-0f21d7a4e1c4", "status": "enabled", "type": "channel.follow", "version": "2"},
				"event":        map[string]any{"user_id": "1234", "user_login": "cool_user", "broadcaster_user_id": "1337", "followed_at": now.UTC().Format(time.RFC3339Nano)},
			}), map[string]string{
				"twitch-eventsub-message-id":           id,
				"twitch-eventsub-message-type":         "notification",
				"twitch-eventsub-subscription-type":    "channel.follow",
				"twitch-eventsub-subscription-version": "2",
			}
	},
	"linear": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
				"action": "create", "type": "Issue", "createdAt": now.UTC().Format(time.RFC3339Nano),
				"data":             map[string]any{"id": id, "title": "Webhook sample", "priority": 0},
				"url":              "https://linear.app/idem/issue/IDE-1/webhook-sample",
				"webhookTimestamp": now.UnixMilli(), "webhookId": "0f0c7a6e-2f4c-4c6a-8f9e-2b1d6a6f1e11",
			}), map[string]string{
				"linear-delivery": derived("delivery"+id, 32), "linear-event": "Issue",
			}
	},
	"gitlab": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
				"object_kind": "push", "event_name": "push", "ref": "refs/heads/main",
				"checkout_sha": derived("sha"+id, 40), "project_id": 15,
				"project": map[string]any{"path_with_namespace": "idem/demo"},
			}), map[string]string{
				"x-gitlab-event": "Push Hook", "idempotency-key": id,
			}
	},
	"bitbucket": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
				"push":       map[string]any{"changes": []any{map[string]any{"new": map[string]any{"type": "branch", "name": "main", "target": map[string]any{"hash": derived("hash"+id, 40)}}}}},
				"repository": map[string]any{"full_name": "idem/demo", "uuid": "{" + id + "}"},
			}), map[string]string{
				"x-event-key": "repo:push", "x-request-uuid": id,
			}
	},
	"adyen": sampleAdyen,
	"intercom": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"type": "notification_event", "id": id, "topic": "conversation.user.created", "app_id": "abc123",
			"created_at": now.Unix(), "delivery_attempts": 1,
			"data": map[string]any{"type": "notification_event_data", "item": map[string]any{"type": "conversation", "id": derived("conv"+id, 12)}},
		}), nil
	},
	"hubspot": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON([]any{map[string]any{
			"eventId": id, "subscriptionId": 12345, "portalId": 62515, "appId": 54321,
			"occurredAt": now.UnixMilli(), "subscriptionType": "contact.creation", "attemptNumber": 0,
			"objectId": 123, "changeSource": "CRM",
		}}), nil
	},
	"sendgrid": func(id string, now time.Time) ([]byte, map[string]string) {
		return append(mustJSON([]any{map[string]any{
			"email": "hello@example.com", "event": "delivered", "sg_event_id": id,
			"sg_message_id": derived("msg"+id, 22), "timestamp": now.Unix(),
		}}), '\r', '\n'), nil
	},
	"mailgun": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"signature":  map[string]any{"token": derived("token"+id, 50)},
			"event-data": map[string]any{"id": id, "event": "delivered", "timestamp": now.Unix(), "recipient": "alice@example.com"},
		}), nil
	},
	"razorpay": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
				"entity": "event", "account_id": "acc_BFQ7uQEaa7j2z7", "event": "payment.captured",
				"contains": []string{"payment"}, "created_at": now.Unix(),
				"payload": map[string]any{"payment": map[string]any{"entity": map[string]any{"id": id, "amount": 50000, "currency": "INR", "status": "captured"}}},
			}), map[string]string{
				"x-razorpay-event-id": id,
			}
	},
	"woocommerce": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
				"id": id, "status": "processing", "currency": "USD", "total": "29.35",
				"date_created": now.UTC().Format("2006-01-02T15:04:05"),
			}), map[string]string{
				"x-wc-webhook-topic": "order.created", "x-wc-webhook-resource": "order",
				"x-wc-webhook-event": "created", "x-wc-webhook-delivery-id": derived("d"+id, 8),
			}
	},
	"calendly": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"event": "invitee.created", "created_at": now.UTC().Format(time.RFC3339Nano),
			"created_by": "https://api.calendly.com/users/AAAAAAAAAAAAAAAA",
			"payload":    map[string]any{"uri": "https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/" + id, "status": "active"},
		}), nil
	},
	"typeform": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"event_id": id, "event_type": "form_response",
			"form_response": map[string]any{"form_id": "lT4Z3j", "token": derived("tok"+id, 32), "submitted_at": now.UTC().Format(time.RFC3339)},
		}), nil
	},
	"coinbase-commerce": func(id string, now time.Time) ([]byte, map[string]string) {
		return mustJSON(map[string]any{
			"id": 1, "scheduled_for": now.UTC().Format(time.RFC3339),
			"event": map[string]any{"id": id, "resource": "event", "type": "charge:confirmed", "api_version": "2018-03-22",
				"created_at": now.UTC().Format(time.RFC3339), "data": map[string]any{"code": derived("code"+id, 8)}},
		}), nil
	},
}
