// Package sqsguide holds the code of docs/library.md's SQS section as the guide shows it, and
// runs it (internal/guide checks that the guide's blocks are here).
package sqsguide

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemsqs"
)

// newGuard builds the client and the guard. Call it once per execution environment, from main
// (or init), and build what uses the guard after it, not in a package-level variable: those are
// initialised before init runs, and would be given a nil guard (which the constructors refuse).
func newGuard() (*idem.Guard, error) {
	// ContextTimeoutEnabled: the client honours the deadlines the guard gives each command. The
	// final store call's is the claim's expiry, so a store that stops answering is reported
	// (NotStored) as another delivery can take the key, not after the client's timeouts.
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	// Result TTL: longer than the source's retry window (SQS: the queue's retention period).
	return idem.New(rdb, idem.WithPrefix("orders"), idem.WithResultTTL(5*24*time.Hour))
}

type Shipment struct{ Tracking string }

func ship(ctx context.Context, msg events.SQSMessage) (Shipment, error) {
	return Shipment{Tracking: "trk_" + msg.MessageId}, nil // your work
}

// orderID is the key: the order id in the body, so one order sent twice as two messages ships
// once (the default key, the message id, is new for every message).
func orderID(m events.SQSMessage) (string, error) {
	var o struct{ ID string }
	err := json.Unmarshal([]byte(m.Body), &o)
	return o.ID, err
}

// orderContent is the fingerprint: what the order is (its id and items), not when it was sent.
// The default, the raw body, would make a resend with a new sent_at a mismatch, failed on every
// delivery until the dead-letter queue takes it.
func orderContent(m events.SQSMessage) (idem.Fingerprint, error) {
	return idem.FingerprintJSON([]byte(m.Body), "id", "items")
}

func newSQSHandler() (*idemsqs.Handler[Shipment], error) {
	guard, err := newGuard()
	if err != nil {
		return nil, err
	}
	return idemsqs.New(guard, ship, idemsqs.WithKey(orderID), idemsqs.WithFingerprint(orderContent))
}

func main() {
	h, err := newSQSHandler()
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(h.Handle)
}

var _ = main // compiled here, run by Lambda

func TestTheGuidesConsumerShipsAResentOrderOnce(t *testing.T) {
	t.Setenv("REDIS_ADDR", testsupport.StartMiniredis(t).Addr())
	h, err := newSQSHandler()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	order := func(msgID, items, sentAt string) events.SQSMessage {
		return events.SQSMessage{MessageId: msgID, Body: `{"id":"ord_1","items":` + items + `,"sent_at":"` + sentAt + `"}`}
	}
	resp, recs := h.Run(ctx, events.SQSEvent{Records: []events.SQSMessage{order("m1", `["book"]`, "10:00")}})
	if recs[0].Kind != idem.Executed || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("first message: %s %v", recs[0].Kind, recs[0].Err)
	}
	// The producer sends the same order again, in a new message, a minute later.
	resp, recs = h.Run(ctx, events.SQSEvent{Records: []events.SQSMessage{order("m2", `["book"]`, "10:01")}})
	if recs[0].Kind != idem.Replayed || recs[0].Result.Tracking != "trk_m1" || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the order resent: %s %+v %v; want the first shipment replayed", recs[0].Kind, recs[0].Result, recs[0].Err)
	}
	// The same order id with other items is not the same order: a mismatch, delivered again.
	resp, recs = h.Run(ctx, events.SQSEvent{Records: []events.SQSMessage{order("m3", `["lamp"]`, "10:02")}})
	if recs[0].Kind != idem.Mismatch || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("other items: %s %v; want a mismatch listed for redelivery", recs[0].Kind, resp.BatchItemFailures)
	}
}
