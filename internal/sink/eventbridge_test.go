package sink

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
)

// putEventsInput is what the tests read of a PutEvents input.
type putEventsInput struct {
	Entries []putEventsEntry
}

// putEventsEntry is what the tests read of one entry of a PutEvents input.
type putEventsEntry struct {
	Source       string
	DetailType   string
	Detail       string
	EventBusName string
	Time         float64
}

// newFakeEventBridge starts a fake EventBridge answering every PutEvents with response.
func newFakeEventBridge(t *testing.T, response string) *testsupport.FakeAWS {
	return testsupport.StartFakeAWS(t, testsupport.AWSJSON11, func(testsupport.AWSRequest) (int, any) {
		return http.StatusOK, response
	})
}

func eventBridgeSinkFromEnv(t *testing.T, f *testsupport.FakeAWS) Sink {
	t.Helper()
	return sinkFromEnv(t, "AWS_ENDPOINT_URL_EVENTBRIDGE", f.URL, map[string]string{EnvSink: "eventbridge", EnvEventBus: "webhooks-bus"})
}

func TestEventBridgePutsOneEntryWithSourceTypeAndEnvelope(t *testing.T) {
	f := newFakeEventBridge(t, `{"FailedEntryCount":0,"Entries":[{"EventId":"11710aed-b79e-4468-a20b-bb3c0c3b4860"}]}`)
	s := eventBridgeSinkFromEnv(t, f)

	e := testEvent()
	untyped := testEvent()
	untyped.Provider, untyped.ID, untyped.Type = "github", "72d3162e-cc78-11e3-81ab-4c9367dc0958", ""
	reqs := sendAll[putEventsInput](t, s, f, e, untyped)
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
	checkEventBridgeEntry(t, r.Input.Entries[0], e)

	if got := reqs[1].Input.Entries[0]; got.Source != "webhook.github" || got.DetailType != DefaultDetailType {
		t.Errorf("untyped entry: Source %q DetailType %q", got.Source, got.DetailType)
	}
}

// checkEventBridgeEntry fails t unless entry is e on the bus webhooks-bus: its source and
// detail type from the provider and type, its time, and its envelope as the detail with the
// body embedded as JSON.
func checkEventBridgeEntry(t *testing.T, entry putEventsEntry, e Event) {
	t.Helper()
	if entry.Source != "webhook."+e.Provider || entry.DetailType != e.Type || entry.EventBusName != "webhooks-bus" {
		t.Errorf("entry = %+v", entry)
	}
	if int64(entry.Time) != e.ReceivedAt.Unix() {
		t.Errorf("Time = %v, want %d", entry.Time, e.ReceivedAt.Unix())
	}
	var detail map[string]any
	if err := json.Unmarshal([]byte(entry.Detail), &detail); err != nil {
		t.Fatalf("Detail is not JSON: %v", err)
	}
	if detail["provider"] != e.Provider || detail["id"] != e.ID || detail["object_id"] != e.ObjectID {
		t.Errorf("Detail = %s", entry.Detail)
	}
	if p, ok := detail["payload"].(map[string]any); !ok || p["object"] != "event" {
		t.Errorf("Detail payload not embedded as JSON: %s", entry.Detail)
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
