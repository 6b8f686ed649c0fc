//go:build linux

package rietest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	consumerhandler "github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
)

// invokeSQS sends a batch to the function and decodes its partial batch response.
func (e *emulator) invokeSQS(t *testing.T, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Post(e.url, "application/json", bytes.NewReader(payload))
	if err != nil {
		t.Errorf("invoke %s: %v", e.name, err)
		return events.SQSEventResponse{}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		events.SQSEventResponse
		ErrorType string `json:"errorType"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || out.ErrorType != "" || out.BatchItemFailures == nil {
		t.Errorf("%s answered %d: %s", e.name, resp.StatusCode, body)
	}
	return out.SQSEventResponse
}

// The consumer in three execution environments at once, each given the same batch (as SQS does
// when a visibility timeout passes while a batch is still being processed), a batch that holds
// one message twice and one event sent twice as two messages: exactly one executed line per
// event id over all three, and the records reported in progress, delivered again, replayed.
//
//cyclo:one scenario read top to bottom (start three environments, deliver, redeliver, count the lines); its steps share its state
func TestConsumerUnderTheEmulatorExecutesEachEventOnce(t *testing.T) {
	tpl, _, bins := setup(t)
	f, ok := tpl.Function("ConsumerFunction")
	if !ok {
		t.Fatal("no ConsumerFunction in the template")
	}
	prefix := strings.TrimSuffix(testsupport.UniquePrefix(t), ":")
	var envs []*emulator
	for range 3 {
		envs = append(envs, startEmulator(t, f, bins[f.Code], lambdaEnv(f, prefix)))
	}

	// What the webhook functions' sqs sink sends for six events, two of them about one object.
	c := &testsupport.SentMessages{}
	snk := sink.NewSQS(c, "https://sqs.us-east-1.amazonaws.com/123456789012/idem-events.fifo")
	ids := []string{"evt_rie_1", "evt_rie_2", "evt_rie_3", "evt_rie_4", "evt_rie_5", "evt_rie_6"}
	for i, id := range ids {
		object := fmt.Sprintf("pi_rie_%d", i)
		if i == 1 {
			object = "pi_rie_0"
		}
		e := sink.Event{Provider: "stripe", ID: id, Type: "payment_intent.succeeded", ObjectID: object, ReceivedAt: time.Now(),
			Body: []byte(`{"id":"` + id + `","object":"event","type":"payment_intent.succeeded"}`)}
		if err := snk.Send(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	var batch events.SQSEvent
	for i, in := range c.Inputs() {
		batch.Records = append(batch.Records, consumerhandler.Delivered(in, fmt.Sprintf("msg-%d", i), 1))
	}
	batch.Records = append(batch.Records, batch.Records[2]) // one message twice
	again := consumerhandler.Delivered(c.Inputs()[4], "msg-resent", 1)
	batch.Records = append(batch.Records, again) // one event as a second message

	responses := make([]events.SQSEventResponse, len(envs))
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Go(func() { responses[i] = e.invokeSQS(t, batch) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Records another environment held are delivered again, until none is left.
	for i, resp := range responses {
		for round := 0; len(resp.BatchItemFailures) > 0; round++ {
			if round == 5 {
				t.Fatalf("environment %d: records still failing after 5 deliveries: %v", i, resp.BatchItemFailures)
			}
			failed := map[string]bool{}
			for _, f := range resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
			}
			var retry events.SQSEvent
			for _, r := range batch.Records {
				if failed[r.MessageId] {
					retry.Records = append(retry.Records, r)
				}
			}
			time.Sleep(100 * time.Millisecond)
			resp = envs[i].invokeSQS(t, retry)
		}
	}

	// The request lines reach the emulators' output a moment after the answers: count them
	// until every event has its executed line and every record its lines, or the bound passes.
	var executed map[string]int
	var lines int
	var functions []string
	count := func() bool {
		executed, lines, functions = map[string]int{}, 0, nil
		for _, e := range envs {
			for _, raw := range strings.Split(e.output.String(), "\n") {
				var l struct{ Msg, Function, Outcome, ID string }
				if json.Unmarshal([]byte(raw), &l) != nil || l.Msg != "request" {
					continue
				}
				lines++
				if l.Function != "ConsumerFunction" {
					functions = append(functions, l.Function)
				}
				if l.Outcome == "executed" {
					executed[l.ID]++
				}
			}
		}
		return len(executed) >= len(ids) && lines >= 3*len(batch.Records)
	}
	eventually(count)
	for _, f := range functions {
		t.Errorf("line of function %q", f)
	}
	for _, id := range ids {
		if executed[id] != 1 {
			t.Errorf("%s: %d executed lines, want 1 (all: %v)", id, executed[id], executed)
		}
	}
	if len(executed) != len(ids) || lines < 3*len(batch.Records) {
		t.Errorf("executed %v in %d lines, want %d ids and at least %d lines", executed, lines, len(ids), 3*len(batch.Records))
	}
}
