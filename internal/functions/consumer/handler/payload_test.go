package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
)

// largeGitHubEvent is a GitHub push event of about n bytes.
func largeGitHubEvent(id string, n int) sink.Event {
	body := `{"ref":"refs/heads/main","repository":{"full_name":"idemlambda/demo"},"commits":[{"message":"` + strings.Repeat("m", n) + `"}]}`
	return sink.Event{Provider: "github", ID: id, DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "push",
		ObjectID: "idemlambda/demo", Unsigned: []string{"delivery_id", "type"}, ReceivedAt: time.Now(), Body: []byte(body)}
}

// sentThrough returns the records the consumer receives for events sent through the real sqs
// sink, whose payloads over the message limit go to store.
func sentThrough(t *testing.T, store sink.PayloadStore, evs ...sink.Event) []events.SQSMessage {
	t.Helper()
	s := &testsupport.SentMessages{}
	snk := sink.NewSQS(s, "https://sqs.eu-west-1.amazonaws.com/123456789012/idem-events.fifo", sink.WithPayloadStore(store))
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

func TestAPayloadKeptInTheStoreReachesProcessWholeAndRunsOnce(t *testing.T) {
	prefix := prefixOf(t)
	store := sink.NewMemoryStore("idem-payloads-test")
	e := largeGitHubEvent("sha256:"+strings.Repeat("1f", 32), 2<<20)
	msgs := sentThrough(t, store, e)
	if len(msgs) != 1 || len(msgs[0].Body) > sink.DefaultSQSMaxMessageBytes || !strings.Contains(msgs[0].Body, `"payload_ref"`) {
		t.Fatalf("%d messages, the first %d bytes", len(msgs), len(msgs[0].Body))
	}

	var mu sync.Mutex
	var got []handler.Event
	process := handler.WithProcess(func(_ context.Context, ev handler.Event) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev)
		return nil
	})
	out := &testsupport.Buffer{}
	h := newHandler(t, prefix, out, process, handler.WithPayloadStore(store))
	for range 6 { // the first delivery and 5 redeliveries
		if resp, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: msgs}); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v, %v", resp.BatchItemFailures, err)
		}
	}
	want := "[" + strings.TrimSpace(strings.Repeat(e.ID+"=replayed ", 5)) + "]"
	if lines := outcomes(requestLines(t, out)); lines[0] != e.ID+"=executed" || fmt.Sprint(lines[1:]) != want {
		t.Fatalf("lines %v", lines)
	}
	if len(got) != 1 || !bytes.Equal(got[0].Payload, e.Body) || got[0].PayloadRef != nil || got[0].Type != "push" {
		t.Fatalf("Process ran %d times; payload %d bytes, want %d", len(got), len(got[0].Payload), len(e.Body))
	}

}

func TestAnEventForwardedByReferenceAndInlineIsOneEvent(t *testing.T) {
	prefix := prefixOf(t)
	store := sink.NewMemoryStore("idem-payloads-test")
	e := largeGitHubEvent("sha256:"+strings.Repeat("2e", 32), 600<<10)
	byRef := sentThrough(t, store, e)[0]
	// A queue whose limit is larger carries the same event inline.
	inline := &testsupport.SentMessages{}
	if err := sink.NewSQS(inline, "https://sqs.eu-west-1.amazonaws.com/123456789012/idem-events.fifo",
		sink.WithMaxMessageBytes(sink.SQSMaxMessageBytesLimit)).Send(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	inlineMsg := handler.Delivered(inline.Inputs()[0], "inline-"+t.Name(), 1)
	if strings.Contains(inlineMsg.Body, "payload_ref") || !strings.Contains(byRef.Body, "payload_ref") {
		t.Fatal("want one message by reference and one inline")
	}
	out := &testsupport.Buffer{}
	h := newHandler(t, prefix, out, handler.WithPayloadStore(store))
	for _, m := range []events.SQSMessage{byRef, inlineMsg} {
		if resp, _ := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{m}}); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", resp.BatchItemFailures)
		}
	}
	if got := outcomes(requestLines(t, out)); fmt.Sprint(got) != fmt.Sprintf("[%s=executed %[1]s=replayed]", e.ID) {
		t.Fatalf("lines %v", got)
	}
}

func TestAReferenceThatCannotBeReadIsDeliveredAgain(t *testing.T) {
	prefix := prefixOf(t)
	store := sink.NewMemoryStore("idem-payloads-test")
	e := largeGitHubEvent("sha256:"+strings.Repeat("3d", 32), 300<<10)
	msgs := sentThrough(t, store, e)
	ran := 0
	process := handler.WithProcess(func(context.Context, handler.Event) error { ran++; return nil })
	for name, opts := range map[string][]handler.Option{
		"no store":       {process},
		"another bucket": {process, handler.WithPayloadStore(sink.NewMemoryStore("other-bucket"))},
		"object missing": {process, handler.WithPayloadStore(sink.NewMemoryStore("idem-payloads-test"))},
	} {
		out := &testsupport.Buffer{}
		resp, _ := newHandler(t, prefix, out, opts...).HandleSQS(context.Background(), events.SQSEvent{Records: msgs})
		if len(resp.BatchItemFailures) != 1 {
			t.Errorf("%s: failures %v, want the record", name, resp.BatchItemFailures)
		}
		if got := outcomes(requestLines(t, out)); fmt.Sprint(got) != "["+e.ID+"=error/payload_unavailable]" {
			t.Errorf("%s: lines %v", name, got)
		}
	}
	if ran != 0 {
		t.Errorf("Process ran %d times", ran)
	}
	// Once the store is there, the record goes through.
	out := &testsupport.Buffer{}
	if resp, _ := newHandler(t, prefix, out, process, handler.WithPayloadStore(store)).HandleSQS(context.Background(),
		events.SQSEvent{Records: msgs}); len(resp.BatchItemFailures) != 0 || ran != 1 {
		t.Errorf("with the store: failures %v, ran %d", resp.BatchItemFailures, ran)
	}
}

// putEntries keeps the entries an EventBridge sink puts, and answers each as accepted.
type putEntries struct {
	entries []ebtypes.PutEventsRequestEntry
}

func (p *putEntries) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	p.entries = append(p.entries, in.Entries...)
	return &eventbridge.PutEventsOutput{}, nil
}

func TestALargeEventBridgeEntryIsResolvedToo(t *testing.T) {
	store := sink.NewMemoryStore("idem-payloads-test")
	bus := &putEntries{}
	e := largeGitHubEvent("sha256:"+strings.Repeat("4c", 32), 1<<20)
	if err := sink.NewEventBridge(bus, "webhooks", sink.WithEventBridgePayloadStore(store)).Send(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	detail := aws.ToString(bus.entries[0].Detail)
	if len(detail) > sink.EventBridgeMaxEntryBytes || !strings.Contains(detail, `"payload_ref"`) {
		t.Fatalf("detail of %d bytes", len(detail))
	}
	var got []byte
	out := &testsupport.Buffer{}
	h := newHandler(t, prefixOf(t), out, handler.WithPayloadStore(store),
		handler.WithProcess(func(_ context.Context, ev handler.Event) error { got = ev.Payload; return nil }))
	raw, _ := json.Marshal(events.EventBridgeEvent{Version: "0", ID: "entry-large", DetailType: "push", Source: "webhook.github",
		Detail: json.RawMessage(detail)})
	if _, err := h.Handle(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, e.Body) {
		t.Fatalf("Process got %d bytes, want the %d sent", len(got), len(e.Body))
	}
}
