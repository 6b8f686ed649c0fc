package handler

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	consumer "github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// paddedGitHubDelivery is GitHub's sample delivery grown to at least n bytes by a member of its
// own, still one JSON object.
func paddedGitHubDelivery(t *testing.T, id string, n int) delivery {
	t.Helper()
	d := sampleDelivery(t, "github", id)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(d.body, &obj); err != nil {
		t.Fatal(err)
	}
	obj["padding"] = json.RawMessage(`"` + strings.Repeat("p", n) + `"`)
	body, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	d.body = body
	return d
}

func TestBodyOverTheLimitIsRefusedWithoutARedisCommand(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	sent := &recordingSink{}
	h, err := New(context.Background(), env(map[string]string{EnvProvider: "github", EnvSecret: verifierSecret("github")}),
		WithRedis(m.NewClient()), WithSink(sent), WithLogOutput(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	d := paddedGitHubDelivery(t, "3f9a8c2e-5d1b-11f0-9a7e-7mb", 7_000_000)
	req := d.signed(t, testSecret("github"), time.Now())
	encoded := req
	encoded.Body, encoded.IsBase64Encoded = base64.StdEncoding.EncodeToString(d.body), true
	before := m.CommandCount()
	for _, r := range []events.APIGatewayV2HTTPRequest{req, encoded} {
		resp, _ := invoke(h, r)
		wantStatus(t, resp, 413, "body_too_large")
	}
	if n := m.CommandCount() - before; n != 0 || sent.attempts() != 0 {
		t.Errorf("a 7 MB body cost %d Redis commands and %d sends, want none", n, sent.attempts())
	}

	// Under the 6 MiB default, the same delivery is taken.
	d = paddedGitHubDelivery(t, "3f9a8c2e-5d1b-11f0-9a7e-6mb", MaxBodyLimit-4096)
	resp, _ := invoke(h, d.signed(t, testSecret("github"), time.Now()))
	wantReceipt(t, resp, "3f9a8c2e-5d1b-11f0-9a7e-6mb")
}

// TestLargeGitHubDeliveryThroughTheSQSSinkIsForwardedOnceAndConsumedWhole sends a signed 2 MiB
// GitHub delivery six times through the sqs sink built from the environment (a fake SQS that
// records its requests, an in-process payload store), then hands the message SQS would deliver
// to the consumer six times.
func TestLargeGitHubDeliveryThroughTheSQSSinkIsForwardedOnceAndConsumedWhole(t *testing.T) {
	const queueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks.fifo"
	fake := testsupport.StartFakeAWS(t, testsupport.AWSJSON10, testsupport.SendMessageAnswer)
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_SQS", fake.URL)
	testsupport.SharedRedis(t)
	prefix := keyPrefix(t)
	store := sink.NewMemoryStore("idem-payloads-test")
	vars := map[string]string{
		EnvProvider: "github", EnvSecret: testSecret("github"), "WEBHOOK_SINK": "sqs", "WEBHOOK_QUEUE_URL": queueURL,
		"IDEM_KEY_PREFIX": prefix, "REDIS_URL": "redis://" + testsupport.SharedRedisAddr(),
	}
	logs := &logBuffer{}
	h, err := New(context.Background(), env(vars), WithLogOutput(logs), WithPayloadStore(store))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	const guid = "3f9a8c2e-5d1b-11f0-9a7e-2mib"
	d := paddedGitHubDelivery(t, guid, 2<<20)
	for i := range 6 { // the first delivery and 5 retries
		resp, _ := invoke(h, d.signed(t, testSecret("github"), time.Now()))
		wantReceipt(t, resp, guid)
		if replayed := resp.Headers[idemhttp.HeaderReplayed] == "true"; replayed != (i > 0) {
			t.Fatalf("delivery %d: replayed %v", i, replayed)
		}
	}
	var outcomes []any
	for _, l := range logs.requests(t) {
		outcomes = append(outcomes, l["outcome"])
	}
	if want := []any{"executed", "replayed", "replayed", "replayed", "replayed", "replayed"}; !equalAny(outcomes, want) {
		t.Fatalf("outcomes %v", outcomes)
	}
	calls := testsupport.Calls[sqsInput](t, fake)
	if len(calls) != 1 || len(calls[0].Input.MessageBody) > sink.DefaultSQSMaxMessageBytes {
		t.Fatalf("%d SendMessage calls, want 1 under the limit", len(calls))
	}
	if keys := store.Keys(); len(keys) != 1 {
		t.Fatalf("store holds %q, want one object", keys)
	}

	in := calls[0].Input
	msg := consumer.Delivered(&sqs.SendMessageInput{MessageBody: aws.String(in.MessageBody),
		MessageGroupId: aws.String(in.MessageGroupId), MessageDeduplicationId: aws.String(in.MessageDeduplicationId)}, "msg-"+t.Name(), 1)
	var payloads [][]byte
	c, err := consumer.New(context.Background(), env(map[string]string{"IDEM_KEY_PREFIX": prefix, "REDIS_URL": vars["REDIS_URL"]}),
		consumer.WithLogOutput(io.Discard), consumer.WithPayloadStore(store),
		consumer.WithProcess(func(_ context.Context, e consumer.Event) error {
			payloads = append(payloads, e.Payload)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 6 {
		if resp, _ := c.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("consumer failures %v", resp.BatchItemFailures)
		}
	}
	if len(payloads) != 1 || !jsonEqual(t, payloads[0], d.body) {
		t.Fatalf("consumer processed %d times, want once with the whole %d-byte body", len(payloads), len(d.body))
	}
}

func TestLargeEventWithoutAPayloadBucketIsRefusedWith413AndItsClaimReleased(t *testing.T) {
	fake := testsupport.StartFakeAWS(t, testsupport.AWSJSON10, testsupport.SendMessageAnswer)
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_SQS", fake.URL)
	testsupport.SharedRedis(t)
	prefix := keyPrefix(t)
	vars := map[string]string{
		EnvProvider: "github", EnvSecret: testSecret("github"), "WEBHOOK_SINK": "sqs",
		"WEBHOOK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks.fifo",
		"IDEM_KEY_PREFIX":   prefix, "REDIS_URL": "redis://" + testsupport.SharedRedisAddr(),
	}
	logs := &logBuffer{}
	h, err := New(context.Background(), env(vars), WithLogOutput(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if warn := logs.lines(t, "events over the sink's message limit will be refused with 413 event_too_large: set WEBHOOK_PAYLOAD_BUCKET to keep them in S3"); len(warn) != 1 {
		t.Fatalf("init logged %d warnings about the payload bucket:\n%s", len(warn), logs.String())
	}
	d := paddedGitHubDelivery(t, "3f9a8c2e-5d1b-11f0-9a7e-nobucket", 300<<10)
	for range 2 {
		resp, _ := invoke(h, d.signed(t, testSecret("github"), time.Now()))
		wantStatus(t, resp, 413, "event_too_large")
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("SQS saw %d requests", n)
	}
	if keys := keysUnder(t, testsupport.SharedRedis(t), prefix); len(keys) != 0 {
		t.Errorf("records left: %v", keys)
	}
}

func equalAny(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// jsonEqual reports whether a and b are the same JSON document, whitespace aside.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, a); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&cb, b); err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
