package sink

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/idemlambda/idem/internal/testsupport"
)

// sqsInput is what the tests read of a SendMessage input.
type sqsInput struct {
	QueueUrl               string
	MessageBody            string
	MessageDeduplicationId string
	MessageGroupId         string
	MessageAttributes      map[string]struct {
		DataType    string
		StringValue string
	}
}

// sqsRequest is what the fake SQS saw of one SendMessage call.
type sqsRequest = testsupport.AWSCall[sqsInput]

// newFakeSQS starts a fake SQS answering every SendMessage with success, or, with a status
// other than 200, with the service's InternalError.
func newFakeSQS(t *testing.T, status int) *testsupport.FakeAWS {
	return testsupport.StartFakeAWS(t, testsupport.AWSJSON10, func(r testsupport.AWSRequest) (int, any) {
		if status != http.StatusOK {
			return status, `{"__type":"com.amazonaws.sqs#InternalError","message":"service unavailable"}`
		}
		return testsupport.SendMessageAnswer(r)
	})
}

// sendAll sends evs through s and returns the calls the fake service f saw, failing unless it
// saw one per event.
func sendAll[In any](t *testing.T, s Sink, f *testsupport.FakeAWS, evs ...Event) []testsupport.AWSCall[In] {
	t.Helper()
	for _, e := range evs {
		if err := s.Send(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	reqs := testsupport.Calls[In](t, f)
	if len(reqs) != len(evs) {
		t.Fatalf("server saw %d requests, want %d", len(reqs), len(evs))
	}
	return reqs
}

// sqsSinkFromEnv builds the sink the way a function does, with the endpoint
// overridden by AWS_ENDPOINT_URL_SQS.
func sqsSinkFromEnv(t *testing.T, f *testsupport.FakeAWS, queueURL string) Sink {
	t.Helper()
	return sinkFromEnv(t, "AWS_ENDPOINT_URL_SQS", f.URL, map[string]string{EnvSink: "sqs", EnvQueueURL: queueURL})
}

// checkSQSCall fails t unless req is a signed SendMessage to queueURL carrying e's envelope,
// with its provider and type as message attributes.
func checkSQSCall(t *testing.T, req sqsRequest, queueURL string, e Event) {
	t.Helper()
	if req.Target != "AmazonSQS.SendMessage" {
		t.Errorf("X-Amz-Target = %q", req.Target)
	}
	if req.ContentType != "application/x-amz-json-1.0" {
		t.Errorf("Content-Type = %q", req.ContentType)
	}
	if !strings.HasPrefix(req.Authorization, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(req.Authorization, "/us-east-1/sqs/aws4_request") {
		t.Errorf("request not signed with the env credentials: %q", req.Authorization)
	}
	if req.Input.QueueUrl != queueURL {
		t.Errorf("QueueUrl = %q, want %q", req.Input.QueueUrl, queueURL)
	}
	checkSQSEnvelope(t, req.Input.MessageBody, e)
	if a := req.Input.MessageAttributes["provider"]; a.DataType != "String" || a.StringValue != e.Provider {
		t.Errorf("provider attribute = %+v", a)
	}
	if a := req.Input.MessageAttributes["type"]; a.DataType != "String" || a.StringValue != e.Type {
		t.Errorf("type attribute = %+v", a)
	}
}

// checkSQSEnvelope fails t unless the message body is e's envelope: its metadata, the time it
// was received, and its body inline as JSON.
func checkSQSEnvelope(t *testing.T, body string, e Event) {
	t.Helper()
	var env struct {
		Provider, ID, Type string
		ObjectID           string          `json:"object_id"`
		ReceivedAt         string          `json:"received_at"`
		Payload            json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("MessageBody is not JSON: %v", err)
	}
	if env.Provider != e.Provider || env.ID != e.ID || env.Type != e.Type || env.ObjectID != e.ObjectID {
		t.Errorf("envelope = %s", body)
	}
	if env.ReceivedAt != "2026-03-01T12:30:00Z" {
		t.Errorf("received_at = %q", env.ReceivedAt)
	}
	var payload, want any
	_ = json.Unmarshal(env.Payload, &payload)
	_ = json.Unmarshal(e.Body, &want)
	if p, _ := json.Marshal(payload); string(p) != mustMarshal(want) {
		t.Errorf("payload = %s, want the body as JSON", env.Payload)
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSQSStandardQueueGetsEnvelopeWithoutFIFOFields(t *testing.T) {
	f := newFakeSQS(t, http.StatusOK)
	queueURL := "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks"
	s := sqsSinkFromEnv(t, f, queueURL)

	e := testEvent()
	reqs := sendAll[sqsInput](t, s, f, e)
	checkSQSCall(t, reqs[0], queueURL, e)
	if reqs[0].Input.MessageDeduplicationId != "" || reqs[0].Input.MessageGroupId != "" {
		t.Errorf("standard queue got FIFO fields: dedup %q group %q", reqs[0].Input.MessageDeduplicationId, reqs[0].Input.MessageGroupId)
	}
}

func TestSQSFIFOQueueDedupesOnEventAndGroupsByObject(t *testing.T) {
	f := newFakeSQS(t, http.StatusOK)
	queueURL := "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks.fifo"
	s := sqsSinkFromEnv(t, f, queueURL)

	e := testEvent()
	noObject := testEvent()
	noObject.ID, noObject.ObjectID = "evt_without_object", ""
	reqs := sendAll[sqsInput](t, s, f, e, noObject)
	checkSQSCall(t, reqs[0], queueURL, e)
	if got, want := reqs[0].Input.MessageDeduplicationId, "stripe:"+e.ID; got != want {
		t.Errorf("MessageDeduplicationId = %q, want %q", got, want)
	}
	if got, want := reqs[0].Input.MessageGroupId, "stripe:"+e.ObjectID; got != want {
		t.Errorf("MessageGroupId = %q, want %q", got, want)
	}
	if got, want := reqs[1].Input.MessageGroupId, "stripe:evt_without_object"; got != want {
		t.Errorf("MessageGroupId without object = %q, want %q", got, want)
	}
}

func TestSQSTokensAreHashedWhenTooLongOrNotPunctuation(t *testing.T) {
	for _, in := range []string{
		"github:" + strings.Repeat("a", 200),
		"shopify:order 42",
		"slack:ünïcode",
	} {
		got := sqsToken(in)
		if len(got) != 64 || !isSQSTokenSafe(got) {
			t.Errorf("sqsToken(%q) = %q, want a 64-char hex digest", in, got)
		}
		if sqsToken(in) != got {
			t.Errorf("sqsToken(%q) is not stable", in)
		}
	}
	if got := sqsToken("stripe:evt_1"); got != "stripe:evt_1" {
		t.Errorf("a valid token should be kept as is, got %q", got)
	}
	if sqsToken("shopify:order 42") == sqsToken("shopify:order 43") {
		t.Error("distinct inputs hashed to the same token")
	}
}

func TestSQSServerErrorIsReturnedWrapped(t *testing.T) {
	f := newFakeSQS(t, http.StatusInternalServerError)
	s := sqsSinkFromEnv(t, f, "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks")

	err := s.Send(context.Background(), testEvent())
	if err == nil {
		t.Fatal("want error from a 500 response")
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InternalError" {
		t.Errorf("err = %v, want the service's InternalError wrapped", err)
	}
	if !strings.Contains(err.Error(), "evt_1NG8Du2eZvKYlo2CUI79vXWy") {
		t.Errorf("error %q lacks the event id", err)
	}
}

func TestSQSOversizeEventWithoutPayloadStoreFailsBeforeAnyRequest(t *testing.T) {
	f := newFakeSQS(t, http.StatusOK)
	s := sqsSinkFromEnv(t, f, "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks")

	e := testEvent()
	e.Body = []byte(`{"blob":"` + strings.Repeat("x", DefaultSQSMaxMessageBytes) + `"}`)
	err := s.Send(context.Background(), e)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrNoPayloadStore) {
		t.Fatalf("err = %v, want ErrTooLarge and ErrNoPayloadStore", err)
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("server saw %d requests, want none", n)
	}
}

func TestSQSMaxMessageBytesFromEnvRaisesTheLimit(t *testing.T) {
	f := newFakeSQS(t, http.StatusOK)
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_SQS", f.URL)
	s, err := FromEnv(context.Background(), envMap(map[string]string{
		EnvSink:               "sqs",
		EnvQueueURL:           "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks",
		EnvSQSMaxMessageBytes: "1048576",
	}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := testEvent()
	e.Body = []byte(`{"blob":"` + strings.Repeat("x", 300*1024) + `"}`)
	if err := s.Send(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}
