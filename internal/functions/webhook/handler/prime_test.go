package handler

import (
	"context"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
)

// Prime has a server that never saw the scripts compile them, writing no key, so the first
// delivery completes by SHA: the server counts no EVAL.
func TestPrimeCompilesTheScriptsSoTheFirstDeliveryCompletesBySHA(t *testing.T) {
	srv := testsupport.StartRedis(t)
	hs := newHarness(t, "stripe", harnessConfig{rdb: srv.NewClient()})
	admin := srv.NewClient()
	if err := hs.h.Prime(context.Background()); err != nil {
		t.Fatalf("Prime: %v", err)
	}
	stats := testsupport.CommandStats(t, admin)
	if stats["script|load"] == 0 || stats["set"] != 0 {
		t.Fatalf("after Prime the server ran %v, want SCRIPT LOAD and no write", stats)
	}
	wantStatus(t, hs.deliver(t, sampleDelivery(t, "stripe", "evt_prime")), 200, "")
	if stats := testsupport.CommandStats(t, admin); stats["evalsha"] != 1 || stats["eval"] != 0 {
		t.Fatalf("the first delivery after Prime: %d EVALSHA and %d EVAL, want 1 and 0", stats["evalsha"], stats["eval"])
	}
}
