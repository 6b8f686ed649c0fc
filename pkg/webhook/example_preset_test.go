package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// A function's request path: a verifier built once at init, then one call
// per delivery that verifies it and returns what deduplication needs, or the
// answer to a handshake. Square signs the notification URL and the body; the
// delivery is Square's published test notification.
func ExampleVerifier_Verify() {
	v, err := webhook.New("square", []string{"Ibxx_5AKakO-3qeNVR61Dw"}, 0)
	if err != nil {
		panic(err)
	}
	d, err := v.Verify(webhook.Request{
		Header: http.Header{"X-Square-Hmacsha256-Signature": {"GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="}},
		Body:   []byte(`{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`),
		URL:    "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
		Now:    time.Now(),
	})
	switch {
	case errors.Is(err, webhook.ErrBadPayload), errors.Is(err, webhook.ErrNoEventID):
		fmt.Println("400:", err)
	case err != nil:
		fmt.Println("401:", err)
	case d.Handshake != nil:
		fmt.Printf("200 %s: %s\n", d.Handshake.ContentType, d.Handshake.Body)
	default:
		fmt.Println(d.ID, d.Type, v.ResultTTL())
	}
	// Output: ac3ac95b-f97d-458c-a6e6-18981597e05f webhooks.test_notification 72h0m0s
}

// The configurable verifier, for a sender of the HMAC families that has no
// preset: here Paddle Billing's scheme, described field by field.
func ExampleNewHMAC() {
	v, err := webhook.NewHMAC(webhook.HMACConfig{
		Header:       "Paddle-Signature",
		HeaderFormat: "ts={timestamp};h1={signature}",
		Layout:       "{timestamp}:{body}",
		Tolerance:    5 * time.Second,
		EventID:      "body:event_id",
		ResultTTL:    96 * time.Hour,
	}, []string{"pdl_ntfset_01hfjx0t4tbwa2akj6pv6kbg1r_x"})
	fmt.Println(v.ResultTTL(), err)
	// Output: 96h0m0s <nil>
}
