package idem

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
)

// A claim whose reply was lost took the key: the next call of the key in the same guard claims
// with the same token, finds its own record and runs at once, instead of waiting for the lost
// claim to expire; another guard still finds the key in progress.
func TestLostClaimIsFoundAgainByTheNextCallOfTheKey(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "fenced"}[fenced], func(t *testing.T) {
			srv := testsupport.StartRedis(t)
			proxy := testsupport.StartProxy(t, srv.Addr())
			c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
			t.Cleanup(func() { c.Close() })
			var opts []Option
			if fenced {
				opts = append(opts, WithFencing())
			}
			g, err := New(c, append(opts, WithLockTTL(time.Minute))...)
			if err != nil {
				t.Fatal(err)
			}
			key := Key{Scope: "lost", ID: "evt_lost_reply"}
			if out, err := g.Do(context.Background(), Key{Scope: "lost", ID: "warm"}, Fingerprint{}, okWork("w")); out.Kind != Executed {
				t.Fatalf("warm-up: %v %v", out.Kind, err) // also loads the fenced claim script
			}
			proxy.SetLatency(0, 500*time.Millisecond)
			out, _ := g.Do(context.Background(), key, Fingerprint{}, okWork("x"))
			proxy.SetLatency(0, 0)
			if out.Kind != Unavailable {
				t.Fatalf("claim with its reply held: %v; want Unavailable", out.Kind)
			}
			other, err := New(srv.NewClient(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			if out, _ := other.Do(context.Background(), key, Fingerprint{}, okWork("y")); out.Kind != InProgress {
				t.Fatalf("another guard: %v; want InProgress (the lost claim took the key)", out.Kind)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				out, err = g.Do(context.Background(), key, Fingerprint{}, okWork("x"))
				if out.Kind != Unavailable || time.Now().After(deadline) {
					break // the client reconnects after the held reply
				}
				time.Sleep(50 * time.Millisecond)
			}
			if out.Kind != Executed {
				t.Fatalf("the next call in the same guard: %v, %v; want Executed under its own lost claim", out.Kind, err)
			}
		})
	}
}

// A completion that the store never answers (the link to it dropped after the claim) does not
// wait for the client's timeouts and retry: the final store call ends when the claim has
// expired at the latest (its TTL counted from the claim's reply), so Do returns, and the
// observer hears of the result it could not store, as another delivery can take the key.
// Without that deadline this client waits out its 3s read timeout (measured: 3.0s). The client
// honours context deadlines (ContextTimeoutEnabled), as redisconn's does.
func TestStalledCompletionIsReportedBeforeTheClaimExpires(t *testing.T) {
	srv := testsupport.StartRedis(t)
	proxy := testsupport.StartProxy(t, srv.Addr())
	const readTimeout = 3 * time.Second
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: readTimeout, MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	var reported time.Time
	var kind Kind
	g, err := New(c, WithLockTTL(time.Second), WithObserver(func(o Observation) { reported, kind = time.Now(), o.Outcome.Kind }))
	if err != nil {
		t.Fatal(err)
	}
	warmUp(g, Fingerprint{})
	start := time.Now()
	out, err := g.Do(context.Background(), Key{Scope: "s", ID: "stalled-completion"}, Fingerprint{}, func(context.Context) (Result, error) {
		proxy.Blackhole()
		return Result{Status: 200}, nil
	})
	proxy.Resume()
	if out.Kind != NotStored || !out.Ran || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do: %v (ran %v, %v); want NotStored after the store call's deadline", out.Kind, out.Ran, err)
	}
	if kind != NotStored {
		t.Fatalf("observer heard %v; want NotStored", kind)
	}
	if took := reported.Sub(start); took >= readTimeout {
		t.Errorf("reported %v after the call began; want before the client's read timeout (%v): the claim's deadline bounds it", took, readTimeout)
	} else {
		t.Logf("reported %v after the call began, with a 1s claim", took.Round(time.Millisecond))
	}
}
