package apigw

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func TestBodyDecodesBase64BeforeAnythingElse(t *testing.T) {
	raw := []byte("{\"a\":1}\n\x00\xff")
	got, err := Body(events.APIGatewayV2HTTPRequest{Body: base64.StdEncoding.EncodeToString(raw), IsBase64Encoded: true}, 100)
	if err != nil || string(got) != string(raw) {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := Body(events.APIGatewayV2HTTPRequest{Body: "%%%", IsBase64Encoded: true}, 100); !errors.Is(err, ErrBadEncoding) {
		t.Fatalf("bad base64: %v", err)
	}
}

func TestBodyOverLimitIsRefused(t *testing.T) {
	big := make([]byte, 11)
	for _, req := range []events.APIGatewayV2HTTPRequest{
		{Body: string(big)},
		{Body: base64.StdEncoding.EncodeToString(big), IsBase64Encoded: true},
	} {
		if _, err := Body(req, 10); !errors.Is(err, ErrBodyTooLarge) {
			t.Fatalf("base64=%v: %v", req.IsBase64Encoded, err)
		}
	}
	if b, err := Body(events.APIGatewayV2HTTPRequest{Body: base64.StdEncoding.EncodeToString(big[:10]), IsBase64Encoded: true}, 10); err != nil || len(b) != 10 {
		t.Fatalf("exactly at the limit: %d, %v", len(b), err)
	}
}

func TestErrorBodyShape(t *testing.T) {
	resp := Error(409, "in_progress", "try later", "retry-after", "3")
	if resp.StatusCode != 409 || resp.Headers["content-type"] != "application/json" || resp.Headers["retry-after"] != "3" {
		t.Fatalf("%+v", resp)
	}
	var eb ErrorBody
	if err := json.Unmarshal([]byte(resp.Body), &eb); err != nil || eb.Error.Code != "in_progress" || eb.Error.Message != "try later" {
		t.Fatalf("body %s: %v", resp.Body, err)
	}
}

func TestRetryAfterRoundsUpToWholeSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", -time.Second: "1", 300 * time.Millisecond: "1", 1001 * time.Millisecond: "2", 12 * time.Second: "12"} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%s) = %s, want %s", d, got, want)
		}
	}
}

func TestHeaderFindsLowerCasedAndMixedCaseNames(t *testing.T) {
	headers := map[string]string{"idempotency-key": "order-1", "X-Hub-Signature-256": "sha256=ab"}
	for name, want := range map[string]string{
		"idempotency-key":     "order-1",   // as API Gateway v2 sends it
		"x-hub-signature-256": "sha256=ab", // a caller that kept the case
		"stripe-signature":    "",          // absent
	} {
		if got := Header(headers, name); got != want {
			t.Errorf("Header(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPublicURLIsRebuiltFromTheAPIGatewayEvent(t *testing.T) {
	cases := []struct {
		domain, path, query, override, want string
	}{
		{"abc123.execute-api.eu-west-1.amazonaws.com", "/webhooks/twilio", "", "", "https://abc123.execute-api.eu-west-1.amazonaws.com/webhooks/twilio"},
		{"abc123.execute-api.eu-west-1.amazonaws.com", "/prod/webhooks/twilio", "foo=1&bar=2", "", "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/webhooks/twilio?foo=1&bar=2"},
		{"abc123.execute-api.eu-west-1.amazonaws.com", "/webhooks/twilio", "bodySHA256=ab", "https://hooks.example.com/twilio", "https://hooks.example.com/twilio?bodySHA256=ab"},
		{"", "", "", "", ""},
	}
	for _, c := range cases {
		if got := PublicURL(c.domain, c.path, c.query, c.override); got != c.want {
			t.Errorf("PublicURL(%q, %q, %q, %q) = %q, want %q", c.domain, c.path, c.query, c.override, got, c.want)
		}
	}
}

// A borrowed header holds what HTTPHeader returns, and nothing of the event borrowed before it.
func TestBorrowHTTPHeaderIsHTTPHeaderWithNothingLeftOver(t *testing.T) {
	events := []map[string]string{
		{"content-type": "application/json", "stripe-signature": "t=1,v1=ab", "user-agent": "Stripe/1.0"},
		{"x-hub-signature-256": "sha256=cd", "X-GitHub-Event": "push", "accept": "*/*"},
		{},
		{"stripe-signature": "t=2,v1=ef"},
	}
	for round := range 3 {
		for i, headers := range events {
			b := BorrowHTTPHeader(headers)
			want := HTTPHeader(headers)
			if len(b.Header) != len(want) {
				t.Fatalf("round %d event %d: %v, want %v", round, i, b.Header, want)
			}
			for k, v := range want {
				if got := b.Header[k]; len(got) != 1 || got[0] != v[0] {
					t.Fatalf("round %d event %d: %s = %q, want %q", round, i, k, got, v)
				}
			}
			b.Release()
		}
	}
}
