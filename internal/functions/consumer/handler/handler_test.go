package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
)

// forwarded returns the records the consumer receives for events sent through the real sqs
// sink to a FIFO queue.
func forwarded(t *testing.T, evs ...sink.Event) []events.SQSMessage {
	t.Helper()
	s := &testsupport.SentMessages{}
	snk := sink.NewSQS(s, "https://sqs.eu-west-1.amazonaws.com/123456789012/idem-events.fifo")
	for _, e := range evs {
		if err := snk.Send(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []events.SQSMessage
	for i, in := range s.Inputs() {
		msgs = append(msgs, handler.Delivered(in, fmt.Sprintf("msg-%d-%s", i, t.Name()), 1))
	}
	return msgs
}

func stripeEvent(id, object string) sink.Event {
	return sink.Event{Provider: "stripe", ID: id, Type: "payment_intent.succeeded", ObjectID: object,
		ReceivedAt: time.Now(), Body: []byte(`{"id":"` + id + `","object":"event","type":"payment_intent.succeeded"}`)}
}

// line is one request line of the consumer.
type line struct {
	Msg, Function, Provider, Outcome, ID, Reason, Error string
	RedisRoundTrips                                     int `json:"redis_round_trips"`
}

func requestLines(t *testing.T, out *testsupport.Buffer) []line {
	t.Helper()
	var lines []line
	for _, raw := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("not a JSON line: %s", raw)
		}
		if l.Msg == "request" {
			lines = append(lines, l)
		}
	}
	return lines
}

func outcomes(lines []line) []string {
	var s []string
	for _, l := range lines {
		s = append(s, l.ID+"="+l.Outcome+cond(l.Reason != "", "/"+l.Reason))
	}
	return s
}

func cond(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

// newHandler returns a consumer on the shared Redis, under a prefix of its own, with its own
// client (one execution environment).
func newHandler(t *testing.T, prefix string, out *testsupport.Buffer, opts ...handler.Option) *handler.Handler {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr()})
	t.Cleanup(func() { c.Close() })
	env := map[string]string{"IDEM_KEY_PREFIX": prefix, "AWS_LAMBDA_FUNCTION_NAME": "idem-ConsumerFunction-x"}
	h, err := handler.New(context.Background(), func(k string) string { return env[k] },
		append([]handler.Option{handler.WithRedis(c), handler.WithLogOutput(out)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func prefixOf(t *testing.T) string {
	testsupport.SharedRedis(t)
	return strings.TrimSuffix(testsupport.UniquePrefix(t), ":")
}

func TestForwardedEventsRunOnceAndLogOneLineEach(t *testing.T) {
	prefix := prefixOf(t)
	out := &testsupport.Buffer{}
	var mu sync.Mutex
	var done []string
	h := newHandler(t, prefix, out, handler.WithProcess(func(_ context.Context, e handler.Event) error {
		mu.Lock()
		defer mu.Unlock()
		done = append(done, e.ID)
		return nil
	}))
	msgs := forwarded(t, stripeEvent("evt_1", "pi_1"), stripeEvent("evt_2", "pi_2"), stripeEvent("evt_1", "pi_1"))
	resp, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: msgs})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, %v", resp.BatchItemFailures, err)
	}
	if got := outcomes(requestLines(t, out)); fmt.Sprint(got) != "[evt_1=executed evt_2=executed evt_1=replayed]" {
		t.Fatalf("lines %v", got)
	}
	for _, l := range requestLines(t, out) {
		if l.Provider != "stripe" || l.Function != "idem-ConsumerFunction-x" || l.RedisRoundTrips != 2 {
			t.Fatalf("line %+v", l)
		}
	}
	// Delivered again by SQS, and by another environment: replayed, never run again.
	out2 := &testsupport.Buffer{}
	if resp, _ := newHandler(t, prefix, out2).HandleSQS(context.Background(), events.SQSEvent{Records: msgs}); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	if got := outcomes(requestLines(t, out2)); fmt.Sprint(got) != "[evt_1=replayed evt_2=replayed evt_1=replayed]" {
		t.Fatalf("redelivery lines %v", got)
	}
	slices.Sort(done)
	if fmt.Sprint(done) != "[evt_1 evt_2]" {
		t.Fatalf("processed %v", done)
	}
}

func TestDefaultProcessLogsOneLinePerEvent(t *testing.T) {
	out := &testsupport.Buffer{}
	h := newHandler(t, prefixOf(t), out)
	h.HandleSQS(context.Background(), events.SQSEvent{Records: forwarded(t, stripeEvent("evt_log", "pi_9"))})
	if n := strings.Count(out.String(), `"msg":"event processed"`); n != 1 || !strings.Contains(out.String(), `"id":"evt_log"`) {
		t.Fatalf("%d event lines:\n%s", n, out.String())
	}
}

func TestFailedEventIsDeliveredAgainAndHoldsBackItsGroup(t *testing.T) {
	prefix := prefixOf(t)
	out := &testsupport.Buffer{}
	h := newHandler(t, prefix, out, handler.WithProcess(func(_ context.Context, e handler.Event) error {
		if e.ID == "evt_a1" {
			return errors.New("downstream refused")
		}
		return nil
	}))
	// evt_a1 and evt_a2 are about one object: one message group, in order.
	msgs := forwarded(t, stripeEvent("evt_a1", "pi_a"), stripeEvent("evt_a2", "pi_a"), stripeEvent("evt_b1", "pi_b"))
	msgs = append(msgs, events.SQSMessage{MessageId: "not-an-event", Body: `{"hello":1}`, EventSourceARN: handler.LocalQueueARN,
		Attributes: map[string]string{"MessageGroupId": "other"}})
	resp, _ := h.HandleSQS(context.Background(), events.SQSEvent{Records: msgs})
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if want := []string{msgs[0].MessageId, msgs[1].MessageId, "not-an-event"}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("failures %v, want %v", ids, want)
	}
	want := "[evt_a1=error/processing_failed evt_a2=error/skipped evt_b1=executed not-an-event=error/invalid_event]"
	if got := outcomes(requestLines(t, out)); fmt.Sprint(got) != want {
		t.Fatalf("lines %v, want %s", got, want)
	}
	out = &testsupport.Buffer{}
	h = newHandler(t, prefix, out, handler.WithProcess(func(context.Context, handler.Event) error { return nil }))
	resp, _ = h.HandleSQS(context.Background(), events.SQSEvent{Records: msgs[:2]})
	if got := outcomes(requestLines(t, out)); len(resp.BatchItemFailures) != 0 || fmt.Sprint(got) != "[evt_a1=executed evt_a2=executed]" {
		t.Fatalf("redelivery: failures %v, lines %v", resp.BatchItemFailures, got)
	}
}

func TestEventBridgeEntriesAreConsumedToo(t *testing.T) {
	out := &testsupport.Buffer{}
	h := newHandler(t, prefixOf(t), out)
	detail := forwarded(t, stripeEvent("evt_eb", "pi_eb"))[0].Body
	raw, _ := json.Marshal(events.EventBridgeEvent{Version: "0", ID: "entry-1", DetailType: "payment_intent.succeeded",
		Source: "webhook.stripe", Detail: json.RawMessage(detail)})
	for range 2 {
		if _, err := h.Handle(context.Background(), raw); err != nil {
			t.Fatal(err)
		}
	}
	if got := outcomes(requestLines(t, out)); fmt.Sprint(got) != "[evt_eb=executed evt_eb=replayed]" {
		t.Fatalf("lines %v", got)
	}
	// And an SQS event through the same entry point.
	sqsRaw, _ := json.Marshal(events.SQSEvent{Records: forwarded(t, stripeEvent("evt_eb", "pi_eb"))})
	resp, err := h.Handle(context.Background(), sqsRaw)
	if r, ok := resp.(events.SQSEventResponse); err != nil || !ok || len(r.BatchItemFailures) != 0 {
		t.Fatalf("SQS through Handle: %#v, %v", resp, err)
	}
	if _, err := h.Handle(context.Background(), json.RawMessage(`{"foo":1}`)); err == nil {
		t.Fatal("an unknown event was accepted")
	}
}

func TestBadSettingsNameTheVariable(t *testing.T) {
	for name, want := range map[string]string{"CONSUMER_CONCURRENCY": "0", "LOG_LEVEL": "loud", "IDEM_RESULT_TTL": "soon"} {
		env := map[string]string{name: want}
		_, err := handler.New(context.Background(), func(k string) string { return env[k] }, handler.WithRedis(redis.NewClient(&redis.Options{})))
		var se *setting.Error
		if !errors.As(err, &se) || se.Var != name {
			t.Errorf("%s=%s: %v", name, want, err)
		}
	}
	_, err := handler.New(context.Background(), func(k string) string {
		return map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}[k]
	})
	var se *setting.Error
	if !errors.As(err, &se) || se.Var != "REDIS_URL" {
		t.Errorf("no REDIS_URL inside Lambda: %v", err)
	}
}

func TestRecordsSharingAMessageIDAreEachDecodedFromTheirOwnBody(t *testing.T) {
	out := &testsupport.Buffer{}
	var mu sync.Mutex
	var done []string
	h := newHandler(t, prefixOf(t), out, handler.WithProcess(func(_ context.Context, e handler.Event) error {
		mu.Lock()
		defer mu.Unlock()
		done = append(done, e.ID+"/"+e.ObjectID)
		return nil
	}))
	msgs := forwarded(t, stripeEvent("evt_same_1", "pi_s1"), stripeEvent("evt_same_2", "pi_s2"))
	msgs[1].MessageId = msgs[0].MessageId
	if resp, _ := h.HandleSQS(context.Background(), events.SQSEvent{Records: msgs}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if got := outcomes(requestLines(t, out)); fmt.Sprint(got) != "[evt_same_1=executed evt_same_2=executed]" {
		t.Fatalf("lines %v", got)
	}
	slices.Sort(done)
	if fmt.Sprint(done) != "[evt_same_1/pi_s1 evt_same_2/pi_s2]" {
		t.Fatalf("processed %v", done)
	}
}
