package handler

import (
	"context"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
)

// Init against a cache whose maxmemory-policy can evict (allkeys-lru) logs a warning naming it,
// and the init line carries the policy. With IDEM_UNSAFE_EVICTION=refuse, deliveries are
// answered 503 with retry-after and nothing reaches the sink, nor Redis.
func TestEvictingCacheIsWarnedAtInitAndRefusedWhenAsked(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		srv := testsupport.StartRedis(t, "--maxmemory-policy", "allkeys-lru")
		cfg := harnessConfig{rdb: srv.NewClient()}
		if refuse {
			cfg.env = map[string]string{"IDEM_UNSAFE_EVICTION": "refuse"}
		}
		hs := newHarness(t, "stripe", cfg)
		if err := hs.h.Prime(context.Background()); err != nil {
			t.Fatalf("Prime: %v", err)
		}
		if !warnsOfEviction(hs.logs.lines(t, ""), "allkeys-lru") {
			t.Errorf("refuse=%v: no warning naming allkeys-lru at init; logs:\n%s", refuse, hs.logs.String())
		}
		if inits := hs.logs.lines(t, "init"); len(inits) != 1 || inits[0]["eviction_policy"] != "allkeys-lru" {
			t.Errorf("refuse=%v: init lines %v, want one with eviction_policy allkeys-lru", refuse, inits)
		}

		resp := hs.deliver(t, sampleDelivery(t, "stripe", "evt_evicting"))
		admin := srv.NewClient()
		keys, _ := admin.DBSize(context.Background()).Result()
		switch {
		case refuse:
			wantStatus(t, resp, 503, codeStoreUnavailable)
			if resp.Headers["retry-after"] == "" {
				t.Error("the 503 has no retry-after")
			}
			if hs.sink.calls != 0 || keys != 0 {
				t.Errorf("refused: the sink ran %d times and Redis holds %d keys, want none", hs.sink.calls, keys)
			}
		default:
			wantStatus(t, resp, 200, "")
			if hs.sink.calls != 1 {
				t.Errorf("warned only: the sink ran %d times, want 1", hs.sink.calls)
			}
		}
	}
}

// warnsOfEviction reports whether one of lines is a warning naming maxmemory-policy
// and policy.
func warnsOfEviction(lines []map[string]any, policy string) bool {
	for _, l := range lines {
		if msg, _ := l["msg"].(string); l["level"] == "WARN" && l["eviction_policy"] == policy && strings.Contains(msg, "maxmemory-policy") {
			return true
		}
	}
	return false
}
