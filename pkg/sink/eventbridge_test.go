package sink

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

type putEventsRequest struct {
	Target        string
	Authorization string
	Input         struct {
		Entries []struct {
			Source       string
			DetailType   string
			Detail       string
			EventBusName string
			Time         float64
		}
	}
}

// fakeEventBridge is an HTTP server speaking the AWS JSON 1.1 protocol of
// EventBridge. It records requests and answers with response.
type fakeEventBridge struct {
	*httptest.Server
	mu       sync.Mutex
	requests []putEventsRequest
	response string
}

func newFakeEventBridge(t *testing.T, response string) *fakeEventBridge {
	t.Helper()
	f := &fakeEventBridge{response: response}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := putEventsRequest{Target: r.Header.Get("X-Amz-Target"), Authorization: r.Header.Get("Authorization")}
		_ = json.Unmarshal(body, &req.Input)
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = io.WriteString(w, f.response)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeEventBridge) seen() []putEventsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]putEventsRequest(nil), f.requests...)
}

func eventBridgeSinkFromEnv(t *testing.T, f *fakeEventBridge) Sink {
	t.Helper()
	return sinkFromEnv(t, "AWS_ENDPOINT_URL_EVENTBRIDGE", f.URL, map[string]string{EnvSink: "eventbridge", EnvEventBus: "webhooks-bus"})
}

func TestEventBridgePutsOneEntryWithSourceTypeAndEnvelope(t *testing.T) {
	f := newFakeEventBridge(t, `{"FailedEntryCount":0,"Entries":[{"EventId":"11710aed-b79e-4468-a20b-bb3c0c3b4860"}]}`)
	s := eventBridgeSinkFromEnv(t, f)

	e := testEvent()
	untyped := testEvent()
	untyped.Provider, untyped.ID, untyped.Type = "github", "72d3162e-cc78-11e3-81ab-4c9367dc0958", ""
	for _, ev := range []Event{e, untyped} {
		if err := s.Send(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.seen()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(reqs))
	}
	r := reqs[0]
	if r.Target != "AWSEvents.PutEvents" {
		t.Errorf("X-Amz-Target = %q", r.Target)
	}
	if !strings.Contains(r.Authorization, "Credential=AKIDTEST/") || !strings.Contains(r.Authorization, "/events/aws4_request") {
		t.Errorf("request not signed with the env credentials: %q", r.Authorization)
	}
	if len(r.Input.Entries) != 1 {
		t.Fatalf("got %d entries, want 1", len(r.Input.Entries))
	}
	entry := r.Input.Entries[0]
	if entry.Source != "webhook.stripe" || entry.DetailType != e.Type || entry.EventBusName != "webhooks-bus" {
		t.Errorf("entry = %+v", entry)
	}
	if int64(entry.Time) != receivedAt.Unix() {
		t.Errorf("Time = %v, want %d", entry.Time, receivedAt.Unix())
	}
	var detail map[string]any
	if err := json.Unmarshal([]byte(entry.Detail), &detail); err != nil {
		t.Fatalf("Detail is not JSON: %v", err)
	}
	if detail["provider"] != "stripe" || detail["id"] != e.ID || detail["object_id"] != e.ObjectID {
		t.Errorf("Detail = %s", entry.Detail)
	}
	if p, ok := detail["payload"].(map[string]any); !ok || p["object"] != "event" {
		t.Errorf("Detail payload not embedded as JSON: %s", entry.Detail)
	}

	if got := reqs[1].Input.Entries[0]; got.Source != "webhook.github" || got.DetailType != DefaultDetailType {
		t.Errorf("untyped entry: Source %q DetailType %q", got.Source, got.DetailType)
	}
}

func TestEventBridgePartialFailureIsAnError(t *testing.T) {
	f := newFakeEventBridge(t, `{"FailedEntryCount":1,"Entries":[{"ErrorCode":"InternalFailure","ErrorMessage":"try again"}]}`)
	s := eventBridgeSinkFromEnv(t, f)

	err := s.Send(context.Background(), testEvent())
	var entryErr *EntryError
	if !errors.As(err, &entryErr) {
		t.Fatalf("err = %v, want *EntryError", err)
	}
	if entryErr.Code != "InternalFailure" || entryErr.Message != "try again" {
		t.Errorf("EntryError = %+v", entryErr)
	}
	if !strings.Contains(err.Error(), "evt_1NG8Du2eZvKYlo2CUI79vXWy") {
		t.Errorf("error %q lacks the event id", err)
	}
}
