package idem

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
)

// Warm has the server compile every script in one round trip (every node of a cluster) and
// writes no key; the first call after it sends the completion by SHA, which the server knows.
func TestWarmLoadsEveryScriptAndTheFirstCallSendsItsSHA(t *testing.T) {
	ctx := context.Background()
	// Pipelines on the one pool, as redisconn's clients have them.
	single := redis.NewClient(&redis.Options{Addr: testsupport.StartRedis(t).Addr(), PipelinePoolSize: -1})
	t.Cleanup(func() { single.Close() })
	cluster := testsupport.StartCluster(t, 3, 0).NewClient()
	t.Cleanup(func() { cluster.Close() })

	for _, tc := range []struct {
		name   string
		client Client
		nodes  func(fn func(*redis.Client))
		trips  int64
	}{
		{"redis-server", single, func(fn func(*redis.Client)) { fn(single) }, 1},
		{"cluster", cluster, func(fn func(*redis.Client)) {
			cluster.ForEachShard(ctx, func(_ context.Context, c *redis.Client) error { fn(c); return nil })
		}, int64(len(guardScripts))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := &testsupport.CommandCounter{}
			tc.client.(interface{ AddHook(redis.Hook) }).AddHook(sent)
			g, err := New(tc.client, WithPrefix(testsupport.UniquePrefix(t)))
			if err != nil {
				t.Fatal(err)
			}
			tc.nodes(func(c *redis.Client) { c.ScriptFlush(ctx) })
			before := sent.RoundTrips.Load()
			if err := g.Warm(ctx); err != nil {
				t.Fatalf("Warm: %v", err)
			}
			if n := sent.RoundTrips.Load() - before; n != tc.trips {
				t.Errorf("Warm took %d round trips, want %d", n, tc.trips)
			}
			if p, safe := g.EvictionPolicy(); p != policyNoEviction || !safe {
				t.Errorf("after Warm the eviction policy reads %q (safe %v), want the server's default %q", p, safe, policyNoEviction)
			}
			tc.nodes(func(c *redis.Client) {
				for _, s := range guardScripts {
					if ok, err := c.ScriptExists(ctx, s.script.Hash()).Result(); err != nil || !ok[0] {
						t.Errorf("%s: script %s not compiled after Warm (%v, %v)", c.Options().Addr, s.script.Hash(), ok, err)
					}
				}
				if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
					t.Errorf("%s: %d keys after Warm (%v), want none", c.Options().Addr, n, err)
				}
			})
			out, err := g.Do(ctx, Key{Scope: "warm", ID: "first"}, Fingerprint{}, func(context.Context) (Result, error) {
				return Result{Status: 200}, nil
			})
			if out.Kind != Executed || out.RoundTrips != 2 {
				t.Fatalf("first call after Warm: %v in %d round trips (%v), want executed in 2: claim and EVALSHA", out.Kind, out.RoundTrips, err)
			}
		})
	}
}

// An unreachable server makes Warm fail within its context's bound, and leaves the guard as it
// was: no script counted as compiled.
func TestWarmFailsWithinItsBoundWhenTheServerIsDown(t *testing.T) {
	addr, _ := testsupport.SilentListener(t) // accepts, never answers
	// Deadlines bound replies only on a client that honours them, as redisconn's clients do.
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := g.Warm(ctx); err == nil {
		t.Fatal("Warm succeeded against a server that never answers")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Warm took %s with a 100ms bound", d)
	}
	for _, s := range guardScripts {
		if g.scripts.known(s.script) {
			t.Errorf("script %s counted as compiled after a failed Warm", s.script.Hash())
		}
	}
}
