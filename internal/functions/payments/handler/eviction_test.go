package handler_test

import (
	"context"
	"testing"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/testsupport"
)

// With IDEM_UNSAFE_EVICTION=refuse on a cache whose maxmemory-policy is allkeys-lru, a payment
// is answered 503 with retry-after: no payment is written, no key is stored.
func TestEvictingCacheRefusedWritesNoPayment(t *testing.T) {
	srv := testsupport.StartRedis(t, "--maxmemory-policy", "allkeys-lru")
	spy := newSpyLedger(ledger.NewMemory())
	h := newHandler(t, env{"REDIS_URL": srv.URL(), "IDEM_UNSAFE_EVICTION": "refuse"}, handler.WithLedger(spy))
	_ = h.Prime(context.Background()) // its synthetic payment is refused too
	resp := do(t, h, post(t, "evicting-1", body1999EUR))
	if resp.StatusCode != 503 || resp.Headers["retry-after"] == "" {
		t.Fatalf("answered %d (retry-after %q): %s; want 503 with retry-after", resp.StatusCode, resp.Headers["retry-after"], resp.Body)
	}
	spy.wantWritten(t, 0)
	if n, err := srv.NewClient().DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Fatalf("%d keys in Redis (%v), want none", n, err)
	}
}
