package idemsqs_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

// A record whose result cannot be stored, once its work ran: a value over 256 KiB once encoded,
// or one encoding/json refuses. The guard keeps a not-replayable marker in place of the result,
// so over 5 deliveries of the record its work runs once, no delivery lists it for SQS to deliver
// again, and the guard's observer hears of each.
func TestRecordWhoseResultCannotBeStoredRunsOnceOverFiveDeliveries(t *testing.T) {
	t.Run("300KiB", func(t *testing.T) {
		big := strings.Repeat("x", 300<<10)
		runs, first := deliverFiveTimes(t, func() string { return big })
		if first != big {
			t.Errorf("first delivery's Result is %d bytes; want fn's 300 KiB value", len(first))
		}
		if runs != 1 {
			t.Errorf("fn ran %d times over 5 deliveries; want 1", runs)
		}
	})
	t.Run("NotEncodableAsJSON", func(t *testing.T) {
		runs, first := deliverFiveTimes(t, func() float64 { return math.Inf(1) })
		if !math.IsInf(first, 1) {
			t.Errorf("first delivery's Result is %v; want fn's value, +Inf", first)
		}
		if runs != 1 {
			t.Errorf("fn ran %d times over 5 deliveries; want 1", runs)
		}
	})
}

// deliverFiveTimes delivers one message 5 times, in 5 batches, to a handler whose fn returns
// value(). It checks every delivery's record and the observer, and returns how many times fn ran
// and the first delivery's Result.
func deliverFiveTimes[Out any](t *testing.T, value func() Out) (runs int, first Out) {
	t.Helper()
	var observed []idem.Kind
	g, err := idem.New(testsupport.SharedRedis(t), idem.WithPrefix(testsupport.UniquePrefix(t)+"sqs"),
		idem.WithObserver(func(o idem.Observation) { observed = append(observed, o.Outcome.Kind) }))
	if err != nil {
		t.Fatal(err)
	}
	h := mustNew(t, g, func(context.Context, events.SQSMessage) (Out, error) {
		runs++
		return value(), nil
	})
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-unstorable", Body: "order 42", EventSourceARN: standardARN}}}
	for delivery := 1; delivery <= 5; delivery++ {
		resp, recs := h.Run(context.Background(), ev)
		r := recs[0]
		if len(resp.BatchItemFailures) != 0 || r.Retry || r.Kind != idem.NotReplayable || !errors.Is(r.Err, idem.ErrNotReplayable) {
			t.Fatalf("delivery %d: %v, retry %v, %v, failures %v; want NotReplayable, not delivered again",
				delivery, r.Kind, r.Retry, r.Err, resp.BatchItemFailures)
		}
		if delivery == 1 {
			first = r.Result
		}
	}
	if len(observed) != 5 {
		t.Errorf("observer heard %v; want 5 NotReplayable", observed)
	}
	return runs, first
}
