package webhook_test

import (
	"fmt"
	"os"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// A function's request path with a preset: built once at init, then verify,
// answer a handshake, or deduplicate on the event id.
func ExampleNewVerifier() {
	p, err := webhook.PresetFor("square", os.Getenv) // or "hmac" with WEBHOOK_HMAC_* set
	if err != nil {
		panic(err)
	}
	v, err := webhook.NewVerifier(p, []string{"Ibxx_5AKakO-3qeNVR61Dw"}, 0)
	if err != nil {
		panic(err)
	}
	publicURL := webhook.PublicURL("abc.execute-api.us-east-1.amazonaws.com", "/webhooks/square", "", "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9")
	r := webhook.Request{
		Headers: map[string]string{"x-square-hmacsha256-signature": "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="},
		Body:    []byte(`{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`),
		URL:     publicURL,
		Now:     time.Now(),
	}
	if err := v.Verify(r); err != nil {
		fmt.Println("401:", err)
		return
	}
	d, err := v.Event(r)
	if err != nil {
		fmt.Println("400:", err)
		return
	}
	if d.Handshake != nil {
		fmt.Printf("200 %s: %s\n", d.Handshake.ContentType, d.Handshake.Body)
		return
	}
	fmt.Println(d.ID, d.Type, v.DefaultResultTTL())
	// Output: ac3ac95b-f97d-458c-a6e6-18981597e05f webhooks.test_notification 72h0m0s
}
