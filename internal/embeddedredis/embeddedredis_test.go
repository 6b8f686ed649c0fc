package embeddedredis_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/embeddedredis"
	"github.com/idemlambda/idem/pkg/idem"
)

// On a miniredis, which cannot compile a shebang line by itself, the core's scripts run at the
// budget's cost: 2 round trips for every first execution (EVAL with the source, then EVALSHA
// of the script as sent), 1 for a replay.
func TestCoreScriptsRunOnMiniredisWithinTheBudget(t *testing.T) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	embeddedredis.RunShebangScripts(m)
	var err error
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	g, err := idem.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	work := func(context.Context) (idem.Result, error) { return idem.Result{Status: 200, Body: []byte("ok")}, nil }
	for _, id := range []string{"first", "second", "third"} {
		out, err := g.Do(ctx, idem.Key{Scope: "local", ID: id}, idem.Fingerprint{}, work)
		if out.Kind != idem.Executed || out.RoundTrips != 2 {
			t.Fatalf("%s: %v in %d round trips (%v); want executed in 2", id, out.Kind, out.RoundTrips, err)
		}
	}
	out, err := g.Do(ctx, idem.Key{Scope: "local", ID: "first"}, idem.Fingerprint{}, work)
	if out.Kind != idem.Replayed || out.RoundTrips != 1 || string(out.Result.Body) != "ok" {
		t.Fatalf("replay: %v in %d round trips (%v)", out.Kind, out.RoundTrips, err)
	}
	failing := func(context.Context) (idem.Result, error) { return idem.Result{}, context.Canceled }
	if out, _ := g.Do(ctx, idem.Key{Scope: "local", ID: "failing"}, idem.Fingerprint{}, failing); out.Kind != idem.Failed || out.RoundTrips != 2 {
		t.Fatalf("failure: %v in %d round trips; want the claim released in 2", out.Kind, out.RoundTrips)
	}
	if keys := m.Keys(); len(keys) != 3 {
		t.Fatalf("keys %v; want the 3 results, and the failed claim released", keys)
	}
}
