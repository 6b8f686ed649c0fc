package idem

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
)

// Warm reads the policy of the server it talks to; only noeviction is safe, since every record
// of the guard has a TTL and volatile-* policies evict those.
func TestWarmReadsTheEvictionPolicy(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "noeviction"} {
		srv := testsupport.StartRedis(t, "--maxmemory-policy", policy)
		g, err := New(srv.NewClient())
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := g.EvictionPolicy(); got != "" {
			t.Errorf("before Warm the policy reads %q, want none", got)
		}
		if err := g.Warm(context.Background()); err != nil {
			t.Fatalf("Warm: %v", err)
		}
		got, safe := g.EvictionPolicy()
		if got != policy {
			t.Errorf("Warm read policy %q, want %q", got, policy)
		}
		if safe != (policy == "noeviction") {
			t.Errorf("policy %q reported safe=%v", policy, safe)
		}
	}
}

// Under EvictionRefuse an evicting store runs nothing: every call is Unavailable with
// ErrUnsafeEviction and writes no key. Once the policy is corrected, the next read (after 10s by
// the guard's clock) lets calls run again.
func TestRefusedEvictionPolicyRunsNothingUntilCorrected(t *testing.T) {
	srv := testsupport.StartRedis(t, "--maxmemory-policy", "allkeys-lru")
	c := srv.NewClient()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	g, err := New(c, WithUnsafeEviction(EvictionRefuse), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ran := 0
	work := func(context.Context) (Result, error) { ran++; return Result{Status: 200}, nil }

	// Without Warm, the first call reads the policy itself.
	wantEveryEntryRefused(t, g, work)
	if ran != 0 {
		t.Fatalf("work ran %d times under an evicting policy", ran)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("%d keys written under a refused policy (%v), want none", n, err)
	}

	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if out, _ := g.Do(ctx, Key{Scope: "s", ID: "3"}, Fingerprint{}, work); out.Kind != Unavailable || out.RoundTrips != 0 {
		t.Fatalf("within 10s of the last read: %v in %d round trips, want unavailable without reading again", out.Kind, out.RoundTrips)
	}
	now.Add(int64(evictionRecheck))
	out, err := g.Do(ctx, Key{Scope: "s", ID: "4"}, Fingerprint{}, work)
	if out.Kind != Executed || ran != 1 || out.RoundTrips != 3 {
		t.Fatalf("after the policy became noeviction: %v in %d round trips, ran %d (%v); want executed once in 3 (read, claim, complete)", out.Kind, out.RoundTrips, ran, err)
	}
	if out, _ := g.Do(ctx, Key{Scope: "s", ID: "5"}, Fingerprint{}, work); out.Kind != Executed || out.RoundTrips != 2 {
		t.Fatalf("once known safe: %v in %d round trips, want executed in 2", out.Kind, out.RoundTrips)
	}
}

// wantEveryEntryRefused checks that Do, DoBatch and Wrap each refuse work on g, whose store's
// policy evicts: Do after reading the policy in 1 round trip, the others from what it read.
func wantEveryEntryRefused(t *testing.T, g *Guard, work Work) {
	t.Helper()
	ctx := context.Background()
	out, err := g.Do(ctx, Key{Scope: "s", ID: "1"}, Fingerprint{}, work)
	if out.Kind != Unavailable || !errors.Is(err, ErrUnsafeEviction) || !errors.Is(err, ErrUnavailable) || out.RoundTrips != 1 {
		t.Fatalf("Do on allkeys-lru: %v in %d round trips (%v), want unavailable with ErrUnsafeEviction after 1", out.Kind, out.RoundTrips, err)
	}
	items := []Item{{Key: Key{Scope: "s", ID: "2"}, Work: work}}
	if outs, errs := g.DoBatch(ctx, items, nil); outs[0].Kind != Unavailable || !errors.Is(errs[0], ErrUnsafeEviction) {
		t.Fatalf("DoBatch on allkeys-lru: %v (%v), want unavailable", outs[0].Kind, errs[0])
	}
	wrapped := mustWrap(t, g, "w", nil, nil, func(ctx context.Context, _ int) (int, error) {
		_, err := work(ctx)
		return 1, err
	})
	if _, err := wrapped(ctx, 7); !errors.Is(err, ErrUnsafeEviction) {
		t.Fatalf("Wrap on allkeys-lru: %v, want ErrUnsafeEviction", err)
	}
}

// A policy that cannot be read (the store is down) is not a safe one under EvictionRefuse.
func TestRefusedEvictionPolicyUnreadableFailsClosed(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	g, err := New(c, WithUnsafeEviction(EvictionRefuse), WithFailOpen(true))
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	out, err := g.Do(context.Background(), Key{Scope: "s", ID: "1"}, Fingerprint{}, func(context.Context) (Result, error) {
		ran = true
		return Result{}, nil
	})
	if out.Kind != Unavailable || ran || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Do with the store down: %v, ran %v (%v); want unavailable, not run", out.Kind, ran, err)
	}
}

func TestPolicyFromInfo(t *testing.T) {
	for _, tc := range []struct {
		info, want string
		ok         bool
	}{
		{"# Memory\r\nused_memory:1\r\nmaxmemory_policy:volatile-lru\r\nallocator_frag_ratio:1\r\n", "volatile-lru", true},
		{"maxmemory_policy:noeviction", "noeviction", true},
		{"# Memory\r\nused_memory:1\r\n", "", false},
		{"maxmemory_policy:\r\n", "", false},
		{"", "", false},
	} {
		if got, ok := policyFromInfo(tc.info); got != tc.want || ok != tc.ok {
			t.Errorf("policyFromInfo(%q) = %q, %v; want %q, %v", tc.info, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzPolicyFromInfo: any reply yields a policy of lower-case letters and dashes, or none.
func FuzzPolicyFromInfo(f *testing.F) {
	f.Add("# Memory\r\nmaxmemory_policy:allkeys-lru\r\n")
	f.Add("maxmemory_policy:\n\n")
	f.Fuzz(func(t *testing.T, info string) {
		p, ok := policyFromInfo(info)
		if ok == (p == "") {
			t.Fatalf("policyFromInfo(%q) = %q, %v", info, p, ok)
		}
		for _, c := range p {
			if (c < 'a' || c > 'z') && c != '-' {
				t.Fatalf("policy %q holds %q", p, c)
			}
		}
	})
}
