package handler

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// The handler's benchmarks: a 2 KB Stripe delivery through Handle, first and replayed, each
// beside the core's Guard.Do doing the same on the same private redis-server in the same round
// (BenchmarkWebhookCoreFirst, BenchmarkWebhookCoreReplay), so `make bench` can put the whole
// request path (decode, verify, parse, claim, forward, log) against the core alone. The sink
// discards, as the core's work does nothing: what is measured is the function's own cost.

// benchStripeBytes is the size of the benchmarks' Stripe event.
const benchStripeBytes = 2048

// discardSink accepts every event and keeps nothing.
type discardSink struct{}

func (discardSink) Send(context.Context, sink.Event) error { return nil }

// benchHandler is a Stripe webhook handler as a function builds it, on c.
func benchHandler(b *testing.B, c redis.UniversalClient) *Handler {
	vars := map[string]string{EnvProvider: "stripe", EnvSecret: "whsec_bench"}
	h, err := New(context.Background(), env(vars), WithRedis(c), WithSink(discardSink{}), WithLogOutput(io.Discard))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	if err := h.Prime(context.Background()); err != nil {
		b.Fatal(err)
	}
	return h
}

// benchStripeRequests returns n signed 2 KB Stripe deliveries, each its own event, numbered
// from from.
func benchStripeRequests(b testing.TB, from, n int, now time.Time) []events.APIGatewayV2HTTPRequest {
	out := make([]events.APIGatewayV2HTTPRequest, n)
	for i := range out {
		r, err := webhooktest.Sample("stripe", "evt_bench_"+strconv.Itoa(from+i), now)
		if err != nil {
			b.Fatal(err)
		}
		// Pad the event's metadata to the benchmark's size, as a real event's object runs long.
		if pad := benchStripeBytes - len(r.Body); pad > 0 {
			r.Body = bytes.Replace(r.Body, []byte(`"metadata": {`), []byte(`"metadata": {"note": "`+strings.Repeat("x", max(pad-12, 0))+`",`), 1)
		}
		signed, err := webhooktest.Sign("stripe", "whsec_bench", webhook.Request{Header: r.Header, Body: r.Body, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		out[i] = events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "POST /webhooks/stripe", RawPath: "/webhooks/stripe",
			Headers: apigw.EventHeaders(signed.Header), Body: string(signed.Body),
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				DomainName: "abc.execute-api.us-east-1.amazonaws.com",
				HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPost, Path: "/webhooks/stripe"},
			},
		}
	}
	return out
}

// benchHandle runs reqs[i] through h, failing on any answer but want.
func benchHandle(b *testing.B, h *Handler, reqs func(i int) events.APIGatewayV2HTTPRequest, replayed bool) {
	ctx := context.Background()
	runtime.GC() // the requests built beforehand are not the handler's garbage
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, _ := h.Handle(ctx, reqs(i))
		if resp.StatusCode != http.StatusOK || (resp.Headers["idempotent-replayed"] == "true") != replayed {
			b.Fatalf("%d %v %s", resp.StatusCode, resp.Headers, resp.Body)
		}
	}
}

// benchChunk is how many first deliveries are built at a time, with the timer stopped: the
// deliveries of a whole run held at once would make the collector's work part of the
// measurement.
const benchChunk = 1000

// BenchmarkWebhookStripeFirst delivers a new event per delivery.
func BenchmarkWebhookStripeFirst(b *testing.B) {
	h := benchHandler(b, testsupport.BenchRedis(b))
	var reqs []events.APIGatewayV2HTTPRequest
	benchHandle(b, h, func(i int) events.APIGatewayV2HTTPRequest {
		if i%benchChunk == 0 {
			b.StopTimer()
			reqs = benchStripeRequests(b, i, benchChunk, time.Now())
			runtime.GC()
			b.StartTimer()
		}
		return reqs[i%benchChunk]
	}, false)
}

func BenchmarkWebhookStripeReplay(b *testing.B) {
	h := benchHandler(b, testsupport.BenchRedis(b))
	req := benchStripeRequests(b, 0, 1, time.Now())[0]
	if resp, _ := h.Handle(context.Background(), req); resp.StatusCode != http.StatusOK {
		b.Fatalf("first delivery: %d %s", resp.StatusCode, resp.Body)
	}
	benchHandle(b, h, func(int) events.APIGatewayV2HTTPRequest { return req }, true)
}

// benchCoreWork is the core benchmarks' work: it answers the receipt a delivery gets.
func benchCoreWork(context.Context) (idem.Result, error) {
	return idem.Result{Status: 200, Body: []byte(`{"received":true,"id":"evt_bench_0","type":"payment_intent.succeeded"}`)}, nil
}

// benchGuard is a guard on c as the handler builds it, its scripts loaded.
func benchGuard(b *testing.B, c redis.UniversalClient) *idem.Guard {
	g, err := idem.New(c)
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Warm(context.Background()); err != nil {
		b.Fatal(err)
	}
	return g
}

func BenchmarkWebhookCoreFirst(b *testing.B) {
	g := benchGuard(b, testsupport.BenchRedis(b))
	fp := idem.FingerprintOf([]byte(`{"id":"evt"}`))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out, err := g.Do(ctx, idem.Key{Scope: "stripe", ID: "evt_bench_" + strconv.Itoa(i)}, fp, benchCoreWork); out.Kind != idem.Executed {
			b.Fatal(out.Kind, err)
		}
	}
}

func BenchmarkWebhookCoreReplay(b *testing.B) {
	g := benchGuard(b, testsupport.BenchRedis(b))
	fp := idem.FingerprintOf([]byte(`{"id":"evt"}`))
	ctx := context.Background()
	key := idem.Key{Scope: "stripe", ID: "evt_bench_0"}
	g.Do(ctx, key, fp, benchCoreWork)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out, err := g.Do(ctx, key, fp, benchCoreWork); out.Kind != idem.Replayed {
			b.Fatal(out.Kind, err)
		}
	}
}

// The benchmarks' deliveries are the size they claim: the sample, padded to 2 KB.
func TestBenchStripeDeliveryIs2KB(t *testing.T) {
	reqs := benchStripeRequests(t, 0, 1, time.Now())
	if n := len(reqs[0].Body); n < benchStripeBytes-16 || n > benchStripeBytes+16 {
		t.Fatalf("the benchmark delivery is %d bytes, want about %d", n, benchStripeBytes)
	}
}
