package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemlambda/idem/internal/testsupport"
)

var receivedAt = time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)

func testEvent() Event {
	return Event{
		Provider:   "stripe",
		ID:         "evt_1NG8Du2eZvKYlo2CUI79vXWy",
		Type:       "payment_intent.succeeded",
		ObjectID:   "pi_3NG8Du2eZvKYlo2C0wGzKQXo",
		ReceivedAt: receivedAt,
		Body:       []byte(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C0wGzKQXo","amount":2000}}}`),
	}
}

// sinkFromEnv builds the sink env describes the way a function does, with the service's AWS
// endpoint (endpointVar, an AWS_ENDPOINT_URL_<SERVICE> variable) pointed at url.
func sinkFromEnv(t *testing.T, endpointVar, url string, env map[string]string) Sink {
	t.Helper()
	testsupport.IsolateAWS(t)
	t.Setenv(endpointVar, url)
	s, err := FromEnv(context.Background(), envMap(env), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLogSinkWritesOneJSONLinePerEventWithBodyEmbedded(t *testing.T) {
	var out testsupport.Buffer
	s, err := FromEnv(context.Background(), envMap(nil), &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*Log); !ok {
		t.Fatalf("default sink is %T, want *Log", s)
	}

	e := testEvent()
	second := e
	second.ID, second.Type, second.ObjectID, second.ReceivedAt = "evt_2", "", "", time.Time{}
	second.Body = []byte(`{"id":"evt_2"}`)
	for _, ev := range []Event{e, second} {
		if err := s.Send(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), out.String())
	}
	checkLogLine(t, lines[0], e)
	var second2 map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &second2); err != nil {
		t.Fatalf("second line is not JSON: %v", err)
	}
	if _, ok := second2["received_at"]; ok {
		t.Errorf("zero received_at should be omitted: %s", lines[1])
	}
}

// checkLogLine fails t unless line is the JSON log line of e: its metadata and its body
// embedded as a JSON object.
func checkLogLine(t *testing.T, line string, e Event) {
	t.Helper()
	var got struct {
		Provider   string          `json:"provider"`
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		ObjectID   string          `json:"object_id"`
		ReceivedAt time.Time       `json:"received_at"`
		Body       json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("line is not JSON: %v\n%s", err, line)
	}
	if got.Provider != e.Provider || got.ID != e.ID || got.Type != e.Type || got.ObjectID != e.ObjectID || !got.ReceivedAt.Equal(e.ReceivedAt) {
		t.Errorf("metadata = %+v, want the event's", got)
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil || body["object"] != "event" {
		t.Errorf("body not embedded as JSON object: %s (%v)", got.Body, err)
	}
}

func TestLogSinkRejectsBodyThatIsNotJSON(t *testing.T) {
	var out testsupport.Buffer
	e := testEvent()
	e.Body = []byte("not json")
	if err := NewLog(&out).Send(context.Background(), e); err == nil {
		t.Fatal("want error for a non-JSON body")
	}
	if out.String() != "" {
		t.Errorf("nothing should be written, got %q", out.String())
	}
}

func TestLogSinkReportsWriteFailure(t *testing.T) {
	boom := errors.New("disk full")
	err := NewLog(failingWriter{boom}).Send(context.Background(), testEvent())
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want wrapping %v", err, boom)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestFromEnvErrorsNameTheVariable(t *testing.T) {
	testsupport.IsolateAWS(t)
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown sink", map[string]string{EnvSink: "kafka"}, EnvSink},
		{"sqs without queue", map[string]string{EnvSink: "sqs"}, EnvQueueURL},
		{"sqs with bad queue url", map[string]string{EnvSink: "sqs", EnvQueueURL: "my-queue"}, EnvQueueURL},
		{"sqs with bad size", map[string]string{EnvSink: "sqs", EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/1/q", EnvSQSMaxMessageBytes: "lots"}, EnvSQSMaxMessageBytes},
		{"sqs with size over the service limit", map[string]string{EnvSink: "sqs", EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/1/q", EnvSQSMaxMessageBytes: "2000000"}, EnvSQSMaxMessageBytes},
		{"eventbridge without bus", map[string]string{EnvSink: "eventbridge"}, EnvEventBus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := FromEnv(context.Background(), envMap(tc.env), nil, nil)
			if err == nil {
				t.Fatalf("got sink %T, want error", s)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

func TestFromEnvBuildsEachSink(t *testing.T) {
	testsupport.IsolateAWS(t)
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvSink: "LOG"}, "*sink.Log"},
		{map[string]string{EnvSink: "sqs", EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/1/q"}, "*sink.SQS"},
		{map[string]string{EnvSink: "eventbridge", EnvEventBus: "default"}, "*sink.EventBridge"},
	}
	for _, tc := range cases {
		s, err := FromEnv(context.Background(), envMap(tc.env), nil, nil)
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if got := fmt.Sprintf("%T", s); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.env, got, tc.want)
		}
	}
}

// TestEveryEnvelopeSaysWhichMembersWereSigned: a GitHub event keyed on its
// body digest, its delivery id and type taken from unsigned headers, says so
// in every sink's document; a Stripe event, all signed, lists no unsigned.
func TestEveryEnvelopeSaysWhichMembersWereSigned(t *testing.T) {
	github := Event{
		Provider: "github", ID: "sha256:" + strings.Repeat("ab", 32),
		DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "push", ObjectID: "octo/repo",
		Unsigned: []string{"delivery_id", "type"}, ReceivedAt: receivedAt, Body: []byte(`{"zen":"x"}`),
	}
	for _, tc := range []struct {
		e           Event
		signed      []string
		unsigned    []string
		hasDelivery bool
	}{
		{testEvent(), []string{"id", "type", "object_id", "payload"}, nil, false},
		{github, []string{"id", "object_id", "payload"}, []string{"delivery_id", "type"}, true},
	} {
		env, err := encodeEnvelope(tc.e, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out testsupport.Buffer
		if err := NewLog(&out).Send(context.Background(), tc.e); err != nil {
			t.Fatal(err)
		}
		for _, doc := range []string{string(env), out.String()} {
			var got struct {
				ID         string   `json:"id"`
				DeliveryID *string  `json:"delivery_id"`
				Type       string   `json:"type"`
				Signed     []string `json:"signed"`
				Unsigned   []string `json:"unsigned"`
			}
			if err := json.Unmarshal([]byte(doc), &got); err != nil {
				t.Fatal(err)
			}
			if got.ID != tc.e.ID || got.Type != tc.e.Type || fmt.Sprint(got.Signed) != fmt.Sprint(tc.signed) || fmt.Sprint(got.Unsigned) != fmt.Sprint(tc.unsigned) {
				t.Errorf("%s: %s", tc.e.Provider, doc)
			}
			if (got.DeliveryID != nil) != tc.hasDelivery || (tc.hasDelivery && *got.DeliveryID != tc.e.DeliveryID) {
				t.Errorf("%s: delivery_id in %s", tc.e.Provider, doc)
			}
		}
	}
}

// pastDeadline is a context whose deadline has passed but which does not report it, as a
// context.WithDeadline of a process resumed after a pause does until its timer fires.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// No sink sends once its context is past its deadline, even when the context does not say so
// yet: the claim the work runs under may be another owner's by then.
func TestSinksSendNothingPastTheDeadline(t *testing.T) {
	ctx := pastDeadline{context.Background()}
	e := Event{Provider: "stripe", ID: "evt_late", Body: []byte(`{}`)}
	var out bytes.Buffer
	if err := NewLog(&out).Send(ctx, e); !errors.Is(err, context.DeadlineExceeded) || out.Len() != 0 {
		t.Errorf("log sink: %v, %d bytes written; want DeadlineExceeded and nothing", err, out.Len())
	}
	sq := &recordingSQS{}
	if err := NewSQS(sq, "https://sqs.eu-west-1.amazonaws.com/1/q").Send(ctx, e); !errors.Is(err, context.DeadlineExceeded) || sq.calls != 0 {
		t.Errorf("sqs sink: %v, %d sends; want DeadlineExceeded and none", err, sq.calls)
	}
	eb := &recordingEventBridge{}
	if err := NewEventBridge(eb, "bus").Send(ctx, e); !errors.Is(err, context.DeadlineExceeded) || eb.calls != 0 {
		t.Errorf("eventbridge sink: %v, %d puts; want DeadlineExceeded and none", err, eb.calls)
	}
}

type recordingSQS struct{ calls int }

func (r *recordingSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.calls++
	return &sqs.SendMessageOutput{}, nil
}

type recordingEventBridge struct{ calls int }

func (r *recordingEventBridge) PutEvents(context.Context, *eventbridge.PutEventsInput, ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	r.calls++
	return &eventbridge.PutEventsOutput{}, nil
}
