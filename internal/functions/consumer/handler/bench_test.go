package handler_test

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// The consumer's benchmark: an SQS batch of 10 new events, each a 2 KB Stripe event as the sqs
// sink forwards it, through HandleSQS, beside the core's DoBatch of 10 new keys on the same
// private redis-server in the same round (BenchmarkConsumerCoreBatch10), so `make bench` can
// put the whole batch path (decode, key, fingerprint, claim, process, complete, log) against
// the core alone. Process does nothing, as the core's work does nothing.

// benchBatches is how many batches are built at a time, with the timer stopped: the batches of
// a whole run held at once would make the collector's work part of the measurement.
const benchBatches = 100

// benchStripePayload is a 2 KB Stripe event called id, as the webhook function forwards it.
func benchStripePayload(b *testing.B, id string) []byte {
	r, err := webhooktest.Sample("stripe", id, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	if pad := 2048 - len(r.Body); pad > 12 {
		r.Body = bytes.Replace(r.Body, []byte(`"metadata": {`), []byte(`"metadata": {"note": "`+strings.Repeat("x", pad-12)+`",`), 1)
	}
	return r.Body
}

// benchBatch is a batch of 10 messages the sqs sink sent, batch n of a run: 10 events of their
// own, each about a payment intent of its own (its own message group).
func benchBatch(b *testing.B, n int, payload []byte) events.SQSEvent {
	sent := &testsupport.SentMessages{}
	snk := sink.NewSQS(sent, "https://sqs.eu-west-1.amazonaws.com/123456789012/idem-events.fifo")
	for j := range 10 {
		id := "evt_bench_" + strconv.Itoa(n) + "_" + strconv.Itoa(j)
		// The sample's own id stays in the payload: the envelope's id is the key.
		if err := snk.Send(context.Background(), sink.Event{Provider: "stripe", ID: id, Type: "payment_intent.succeeded",
			ObjectID: "pi_" + id, ReceivedAt: time.Now(), Body: payload}); err != nil {
			b.Fatal(err)
		}
	}
	var ev events.SQSEvent
	for j, in := range sent.Inputs() {
		ev.Records = append(ev.Records, handler.Delivered(in, "msg-"+strconv.Itoa(n)+"-"+strconv.Itoa(j), 1))
	}
	return ev
}

func BenchmarkConsumerBatch10(b *testing.B) {
	h, err := handler.New(context.Background(), func(string) string { return "" }, handler.WithRedis(testsupport.BenchRedis(b)),
		handler.WithProcess(func(context.Context, handler.Event) error { return nil }), handler.WithLogOutput(io.Discard))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	if err := h.Prime(context.Background()); err != nil {
		b.Fatal(err)
	}
	payload := benchStripePayload(b, "evt_bench")
	ctx := context.Background()
	var batches []events.SQSEvent
	build := func(from int) {
		batches = batches[:0]
		for n := range benchBatches {
			batches = append(batches, benchBatch(b, from+n, payload))
		}
		runtime.GC() // the batches built are not the handler's garbage
	}
	build(-benchBatches)
	if resp, _ := h.HandleSQS(ctx, batches[0]); len(resp.BatchItemFailures) != 0 {
		b.Fatal(resp.BatchItemFailures) // connects, as the first batch of an environment does
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%benchBatches == 0 {
			b.StopTimer()
			build(i)
			b.StartTimer()
		}
		if resp, _ := h.HandleSQS(ctx, batches[i%benchBatches]); len(resp.BatchItemFailures) != 0 {
			b.Fatal(resp.BatchItemFailures)
		}
	}
}

func BenchmarkConsumerCoreBatch10(b *testing.B) {
	g, err := idem.New(testsupport.BenchRedis(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := g.Warm(ctx); err != nil {
		b.Fatal(err)
	}
	fp := idem.FingerprintOf([]byte(`{"id":"evt"}`))
	work := func(context.Context) (idem.Result, error) { return idem.Result{}, nil }
	items := make([]idem.Item, 10)
	g.DoBatch(ctx, []idem.Item{{Key: idem.Key{Scope: handler.Scope, ID: "batch-warm"}, Fingerprint: fp, Work: work}}, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range items {
			items[j] = idem.Item{Key: idem.Key{Scope: handler.Scope, ID: "stripe:evt_bench_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)}, Fingerprint: fp, Work: work}
		}
		outs, errs := g.DoBatch(ctx, items, nil)
		for j, out := range outs {
			if out.Kind != idem.Executed {
				b.Fatal(out.Kind, errs[j])
			}
		}
	}
}
