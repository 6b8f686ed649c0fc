package handler_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/testsupport"
)

// Prime has a server that never saw the scripts compile them, writing no key, so the first
// batch completes by SHA: the server counts no EVAL.
func TestPrimeCompilesTheScriptsSoTheFirstBatchCompletesBySHA(t *testing.T) {
	srv := testsupport.StartRedis(t)
	admin := srv.NewClient()
	env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "idem-ConsumerFunction-x"}
	h, err := handler.New(context.Background(), func(k string) string { return env[k] },
		handler.WithRedis(srv.NewClient()), handler.WithLogOutput(&testsupport.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Prime(context.Background()); err != nil {
		t.Fatalf("Prime: %v", err)
	}
	stats := testsupport.CommandStats(t, admin)
	if stats["script|load"] == 0 || stats["set"] != 0 {
		t.Fatalf("after Prime the server ran %v, want SCRIPT LOAD and no write", stats)
	}
	msgs := forwarded(t, stripeEvent("evt_prime_1", "pi_1"), stripeEvent("evt_prime_2", "pi_2"))
	if resp, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: msgs}); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("first batch: %v, %v", resp.BatchItemFailures, err)
	}
	if stats := testsupport.CommandStats(t, admin); stats["evalsha"] != 1 || stats["eval"] != 0 {
		t.Fatalf("the first batch after Prime: %d EVALSHA and %d EVAL, want 1 and 0", stats["evalsha"], stats["eval"])
	}
}
