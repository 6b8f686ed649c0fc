package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
)

// sqsInput is what the tests read of a SendMessage input.
type sqsInput struct {
	QueueUrl               string
	MessageBody            string
	MessageDeduplicationId string
	MessageGroupId         string
	MessageAttributes      map[string]struct{ DataType, StringValue string }
}

// credentialsEndpoint serves AWS credentials as the container credentials endpoint does
// (AWS_CONTAINER_CREDENTIALS_FULL_URI) and counts the fetches. An SDK client fetches them on
// its first request and caches them until they expire, so every client built costs a fetch.
func credentialsEndpoint(t *testing.T) *atomic.Int64 {
	t.Helper()
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"AccessKeyId": "ASIATESTCONTAINER", "SecretAccessKey": "secret-test", "Token": "token-test",
			"Expiration": time.Now().Add(6 * time.Hour).UTC().Format(time.RFC3339),
		})
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/v2/credentials")
	return &fetches
}

// Stripe and GitHub events delivered twice each reach a FIFO queue once each, deduplicated on
// the idempotency key and grouped by the object they concern, in the documented envelope; each
// environment builds its SQS client, and fetches its credentials, once.
func TestSQSSinkForwardsEachEventOnceToAFIFOQueue(t *testing.T) {
	const queueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks.fifo"
	fake := testsupport.StartFakeAWS(t, testsupport.AWSJSON10, testsupport.SendMessageAnswer)
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_SQS", fake.URL)
	credentialFetches := credentialsEndpoint(t)
	testsupport.SharedRedis(t)

	prefix := keyPrefix(t)
	handlers := map[string]*Handler{}
	for _, provider := range []string{"stripe", "github"} {
		vars := map[string]string{
			EnvProvider: provider, EnvSecret: testSecret(provider),
			"WEBHOOK_SINK": "sqs", "WEBHOOK_QUEUE_URL": queueURL,
			"IDEM_KEY_PREFIX": prefix, "REDIS_URL": "redis://" + testsupport.SharedRedisAddr(),
		}
		h, err := New(context.Background(), env(vars), WithLogOutput(io.Discard))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		handlers[provider] = h
	}
	deliver := func(provider, id string) {
		t.Helper()
		d := sampleDelivery(t, provider, id)
		for range 2 { // the first delivery and a retry
			resp, _ := invoke(handlers[provider], d.signed(t, testSecret(provider), time.Now()))
			wantReceipt(t, resp, id)
		}
	}

	deliver("stripe", "evt_1SQSfifo")
	deliver("github", "3f9a8c2e-5d1b-11f0-9a7e-sqsfifo")
	calls := testsupport.Calls[sqsInput](t, fake)
	if len(calls) != 2 {
		t.Fatalf("SQS got %d SendMessage calls for 2 events delivered twice each", len(calls))
	}
	stripeBody, _ := signer(t, "stripe").Sample("evt_1SQSfifo", fixedNow)
	githubBody, _ := signer(t, "github").Sample("3f9a8c2e-5d1b-11f0-9a7e-sqsfifo", fixedNow)
	checkFIFOSends(t, calls, queueURL, []fifoMessage{
		{"stripe:evt_1SQSfifo", "stripe:" + stripeObjectID(t, stripeBody)},
		// GitHub's key, signed, is its body's digest, not the unsigned delivery id.
		{"github:" + bodyDigest(githubBody), "github:idemlambda/demo"},
	})
	var envelope struct {
		Provider string          `json:"provider"`
		ID       string          `json:"id"`
		Type     string          `json:"type"`
		Payload  json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal([]byte(calls[0].Input.MessageBody), &envelope); err != nil {
		t.Fatal(err)
	}
	var payload, sent map[string]any
	_ = json.Unmarshal(envelope.Payload, &payload)
	_ = json.Unmarshal(stripeBody, &sent)
	if envelope.Provider != "stripe" || envelope.ID != "evt_1SQSfifo" || envelope.Type != "payment_intent.succeeded" ||
		fmt.Sprint(payload) != fmt.Sprint(sent) {
		t.Errorf("message body %s", calls[0].Input.MessageBody)
	}
	if a := calls[0].Input.MessageAttributes["provider"]; a.StringValue != "stripe" {
		t.Errorf("provider attribute %+v", a)
	}

	// The SQS client is built once per environment: later sends reuse its credentials.
	for i := range 10 {
		deliver("stripe", fmt.Sprintf("evt_1SQSmore%d", i))
	}
	if calls := testsupport.Calls[sqsInput](t, fake); len(calls) != 12 {
		t.Errorf("SQS got %d calls, want 12", len(calls))
	}
	if n := credentialFetches.Load(); n != 2 {
		t.Errorf("credentials fetched %d times for 2 environments sending 12 messages, want 2", n)
	}
}

// fifoMessage is the deduplication id and message group a FIFO send is expected to carry.
type fifoMessage struct{ dedup, group string }

// checkFIFOSends checks that calls are SendMessage calls to queueURL carrying want, in order.
func checkFIFOSends(t *testing.T, calls []testsupport.AWSCall[sqsInput], queueURL string, want []fifoMessage) {
	t.Helper()
	for i, c := range calls {
		if c.Target != "AmazonSQS.SendMessage" || c.Input.QueueUrl != queueURL {
			t.Errorf("call %d: target %q queue %q", i, c.Target, c.Input.QueueUrl)
		}
		if c.Input.MessageDeduplicationId != want[i].dedup || c.Input.MessageGroupId != want[i].group {
			t.Errorf("call %d: dedup id %q group %q, want %q %q", i,
				c.Input.MessageDeduplicationId, c.Input.MessageGroupId, want[i].dedup, want[i].group)
		}
	}
}

func stripeObjectID(t *testing.T, body []byte) string {
	t.Helper()
	var ev struct {
		Data struct {
			Object struct {
				ID string `json:"id"`
			} `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Data.Object.ID == "" {
		t.Fatalf("sample has no data.object.id: %v", err)
	}
	return ev.Data.Object.ID
}
