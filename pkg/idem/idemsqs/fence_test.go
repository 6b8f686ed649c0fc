package idemsqs_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

// With fencing on, every record's work reads its own claim's token from its context.
func TestRecordsReadTheirFencingTokens(t *testing.T) {
	g, err := idem.New(testsupport.SharedRedis(t), idem.WithPrefix(testsupport.UniquePrefix(t)+"sqs"), idem.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fences := map[string]uint64{}
	h := mustNew(t, g, func(ctx context.Context, msg events.SQSMessage) (struct{}, error) {
		f, ok := idem.FenceFrom(ctx)
		if !ok {
			t.Errorf("message %s: no token", msg.MessageId)
		}
		mu.Lock()
		fences[msg.MessageId] = f
		mu.Unlock()
		return struct{}{}, nil
	})
	resp, recs := h.Run(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: "a"}, {MessageId: "m2", Body: "b"},
	}})
	if len(resp.BatchItemFailures) != 0 || recs[0].Kind != idem.Executed || recs[1].Kind != idem.Executed {
		t.Fatalf("batch: %+v", recs)
	}
	if fences["m1"] == 0 || fences["m2"] == 0 {
		t.Fatalf("tokens %v; want one per record", fences)
	}
}
