package handler_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

// The handler's benchmarks: a payment created through Handle, first and replayed, each beside
// the core's Guard.Do doing the same on the same private redis-server in the same round
// (BenchmarkPaymentsCoreFirst, BenchmarkPaymentsCoreReplay), with fencing as the function
// builds its guard, so `make bench` can put the whole request path (route, content type, key,
// body, claim, ledger, respond, log) against the core alone. The ledger is the in-memory one,
// as the core's work does nothing but answer: what is measured is the function's own cost.

// benchPaymentsChunk is how many first requests are built at a time: the requests of a whole
// run held at once would make the collector's work part of the measurement.
const benchPaymentsChunk = 1000

// benchPayments is the payments handler as the function builds it, on c, with the in-memory
// ledger and its log discarded.
func benchPayments(b *testing.B, c redis.UniversalClient) *handler.Handler {
	h, err := handler.New(context.Background(), env{}.get, handler.WithRedis(c), handler.WithLedger(ledger.NewMemory()), handler.WithLogOutput(io.Discard))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	if err := h.Prime(context.Background()); err != nil {
		b.Fatal(err)
	}
	return h
}

// benchCreate is a POST /payments with the idempotency key key.
func benchCreate(b *testing.B, key string) events.APIGatewayV2HTTPRequest {
	return post(b, key, `{"amount":1999,"currency":"EUR"}`)
}

// benchServe runs req(i) through h for b.N requests, failing on any answer but a 201 (replayed
// or not as said).
func benchServe(b *testing.B, h *handler.Handler, req func(i int) events.APIGatewayV2HTTPRequest, replayed bool) {
	ctx := context.Background()
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, _ := h.Handle(ctx, req(i))
		if resp.StatusCode != http.StatusCreated || (resp.Headers[handler.HeaderReplayed] == "true") != replayed {
			b.Fatalf("%d %v %s", resp.StatusCode, resp.Headers, resp.Body)
		}
	}
}

// BenchmarkPaymentsCreateFirst creates a payment per request, each with its own key; every
// benchPaymentsChunk requests the next ones are built with the timer stopped.
func BenchmarkPaymentsCreateFirst(b *testing.B) {
	h := benchPayments(b, testsupport.BenchRedis(b))
	var reqs []events.APIGatewayV2HTTPRequest
	benchServe(b, h, func(i int) events.APIGatewayV2HTTPRequest {
		if i%benchPaymentsChunk == 0 {
			b.StopTimer()
			reqs = reqs[:0]
			for j := range benchPaymentsChunk {
				reqs = append(reqs, benchCreate(b, "bench-"+strconv.Itoa(i+j)))
			}
			runtime.GC()
			b.StartTimer()
		}
		return reqs[i%benchPaymentsChunk]
	}, false)
}

func BenchmarkPaymentsCreateReplay(b *testing.B) {
	h := benchPayments(b, testsupport.BenchRedis(b))
	req := benchCreate(b, "bench-replay")
	if resp, _ := h.Handle(context.Background(), req); resp.StatusCode != http.StatusCreated {
		b.Fatalf("first request: %d %s", resp.StatusCode, resp.Body)
	}
	benchServe(b, h, func(int) events.APIGatewayV2HTTPRequest { return req }, true)
}

// benchPaymentsWork is the core benchmarks' work: it answers what a created payment gets.
func benchPaymentsWork(context.Context) (idem.Result, error) {
	return idem.Result{Status: http.StatusCreated, Body: []byte(`{"id":"pay_bench","amount":1999,"currency":"EUR","status":"succeeded","created_at":"2026-12-01T00:00:00Z"}`)}, nil
}

// benchPaymentsGuard is a guard on c as the handler builds it (fencing), its scripts loaded.
func benchPaymentsGuard(b *testing.B, c redis.UniversalClient) *idem.Guard {
	g, err := idem.New(c, idem.WithFencing())
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Warm(context.Background()); err != nil {
		b.Fatal(err)
	}
	return g
}

func BenchmarkPaymentsCoreFirst(b *testing.B) {
	g := benchPaymentsGuard(b, testsupport.BenchRedis(b))
	fp := idem.FingerprintOf([]byte(`{"amount":1999,"currency":"EUR"}`))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out, err := g.Do(ctx, idem.Key{Scope: handler.Scope, ID: "bench-" + strconv.Itoa(i)}, fp, benchPaymentsWork); out.Kind != idem.Executed {
			b.Fatal(out.Kind, err)
		}
	}
}

func BenchmarkPaymentsCoreReplay(b *testing.B) {
	g := benchPaymentsGuard(b, testsupport.BenchRedis(b))
	fp := idem.FingerprintOf([]byte(`{"amount":1999,"currency":"EUR"}`))
	ctx := context.Background()
	key := idem.Key{Scope: handler.Scope, ID: "bench-replay"}
	g.Do(ctx, key, fp, benchPaymentsWork)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if out, err := g.Do(ctx, key, fp, benchPaymentsWork); out.Kind != idem.Replayed {
			b.Fatal(out.Kind, err)
		}
	}
}
