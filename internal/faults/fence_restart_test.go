package faults

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

// TestFenceIncreasesAcrossARestartWithPersistence: a claim after redis-server restarted from its
// append-only file carries a larger token than every claim before the restart, for a key whose
// last claim completed, was released, or expired.
func TestFenceIncreasesAcrossARestartWithPersistence(t *testing.T) {
	srv := testsupport.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	client := srv.NewClient()
	g, err := idem.New(client, idem.WithPrefix(prefix), idem.WithFencing(),
		idem.WithResultTTL(200*time.Millisecond), idem.WithLockTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	claim := func(id string, work func(context.Context) (idem.Result, error)) uint64 {
		t.Helper()
		var fence uint64
		_, _ = g.Do(context.Background(), idem.Key{Scope: "restart", ID: id}, idem.Fingerprint{}, func(ctx context.Context) (idem.Result, error) {
			fence, _ = idem.FenceFrom(ctx)
			return work(ctx)
		})
		if fence == 0 {
			t.Fatalf("%s: the work ran without a token", id)
		}
		return fence
	}
	succeed := func(context.Context) (idem.Result, error) { return idem.Result{Status: 200}, nil }
	fail := func(context.Context) (idem.Result, error) { return idem.Result{}, errors.New("refused") }
	expire := func(ctx context.Context) (idem.Result, error) {
		time.Sleep(700 * time.Millisecond) // past the claim: LockLost
		return idem.Result{Status: 200}, nil
	}
	before := map[string]uint64{
		"completed": claim("completed", succeed),
		"released":  claim("released", fail),
		"expired":   claim("expired", expire),
	}
	// A key whose tokens came from a clock that ran 10^12 µs (11.6 days) ahead, since set back:
	// only the persisted counter keeps its next token above them.
	ahead := claim("clock_ahead", fail) + 1_000_000_000_000
	if err := client.Set(context.Background(), recordKey(prefix, "restart", "clock_ahead")+":fence", ahead, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	before["clock_ahead"] = ahead
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the completed result expires
	for id, f := range before {
		var after uint64
		deadline := time.Now().Add(5 * time.Second)
		for after == 0 && time.Now().Before(deadline) {
			var fence uint64
			out, _ := g.Do(context.Background(), idem.Key{Scope: "restart", ID: id}, idem.Fingerprint{}, func(ctx context.Context) (idem.Result, error) {
				fence, _ = idem.FenceFrom(ctx)
				return idem.Result{}, errors.New("only the token is wanted")
			})
			if out.Kind == idem.Failed {
				after = fence
			} else {
				time.Sleep(50 * time.Millisecond) // the client reconnects
			}
		}
		if after <= f {
			t.Errorf("%s: token %d after the restart, not above %d before it", id, after, f)
		}
		t.Logf("%s: token %d before the restart, %d after", id, f, after)
	}
}
