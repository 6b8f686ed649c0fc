package idem

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
)

// lateReplies delays the reply of every claim (SET ... NX ... GET, or an ordered claim's
// script) by delay, after the server ran it: the conditions of a starved process or of a claim
// retried on a fresh connection, whose reply comes when little or none of the claim's TTL is left.
type lateReplies struct{ delay time.Duration }

func (lateReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h lateReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if isClaim(cmd) {
			time.Sleep(h.delay)
		}
		return err
	}
}

func (h lateReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if isClaim(cmd) {
				time.Sleep(h.delay)
				break
			}
		}
		return err
	}
}

func isClaim(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) > 0 && strings.EqualFold(args[0].(string), "set")
}

// TestWorkNeverStartsWhenTheClaimsReplyComesTooLate: a claim whose reply arrives after the
// work's deadline (its TTL less the safety margin) runs nothing. Before this was checked, the
// work ran with an ended context while its claim had expired in Redis, which a CPU-starved host
// with dropped connections produced in the fault tests.
func TestWorkNeverStartsWhenTheClaimsReplyComesTooLate(t *testing.T) {
	testsupport.SharedRedis(t)
	const lockTTL = 700 * time.Millisecond
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{
		{"ClaimExpiredBeforeItsReply", lockTTL + 300*time.Millisecond},
		{"LessThanTheSafetyMarginLeft", lockTTL - safetyMargin + 100*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr()})
			t.Cleanup(func() { c.Close() })
			prefix := testsupport.UniquePrefix(t) + "late"
			fp := FingerprintOf([]byte("late"))
			plain, err := New(c, WithPrefix(prefix), WithLockTTL(lockTTL))
			if err != nil {
				t.Fatal(err)
			}
			warmUp(plain, fp) // the scripts compiled: the release is one EVALSHA
			late := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr()})
			t.Cleanup(func() { late.Close() })
			late.AddHook(lateReplies{tc.delay})
			g, err := New(late, WithPrefix(prefix), WithLockTTL(lockTTL))
			if err != nil {
				t.Fatal(err)
			}
			var ran atomic.Int32
			work := func(context.Context) (Result, error) { ran.Add(1); return Result{Status: 200}, nil }

			key := Key{Scope: "late", ID: "do"}
			out, err := g.Do(context.Background(), key, fp, work)
			if ran.Load() != 0 || out.Kind != Unavailable || !errors.Is(err, errClaimTooLate) || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Do with the claim's reply %s late: work ran %d times, %v, %v; want no run, unavailable, the late-claim error",
					tc.delay, ran.Load(), out.Kind, err)
			}
			items := []Item{{Key: Key{Scope: "late", ID: "b1"}, Fingerprint: fp, Work: work}, {Key: Key{Scope: "late", ID: "b2"}, Fingerprint: fp, Work: work}}
			outs, errs := g.DoBatch(context.Background(), items, nil)
			for i := range outs {
				if outs[i].Kind != Unavailable || !errors.Is(errs[i], errClaimTooLate) {
					t.Errorf("batch item %d: %v, %v; want unavailable, the late-claim error", i, outs[i].Kind, errs[i])
				}
			}
			if n := ran.Load(); n != 0 {
				t.Fatalf("work ran %d times after late claim replies", n)
			}
			// Released (or expired): the next delivery, answered in time, runs each once.
			for _, k := range []Key{key, items[0].Key, items[1].Key} {
				if out, err := plain.Do(context.Background(), k, fp, work); out.Kind != Executed {
					t.Errorf("%s after the late claim: %v, %v; want executed", k.ID, out.Kind, err)
				}
			}
			if n := ran.Load(); n != 3 {
				t.Errorf("work ran %d times; want 3, once per key", n)
			}
		})
	}
}

// TestBatchWorkCalledAfterItsDeadlineDoesNotRun: a batch's run function that calls an item's
// work after the claims' deadline runs nothing for it; the item fails and its claim is released.
func TestBatchWorkCalledAfterItsDeadlineDoesNotRun(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	g, err := New(m.NewClient(), WithLockTTL(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	fp := FingerprintOf([]byte("x"))
	var ran atomic.Int32
	work := func(context.Context) (Result, error) { ran.Add(1); return Result{Status: 200}, nil }
	items := []Item{{Key: Key{Scope: "s", ID: "first"}, Fingerprint: fp, Work: work}, {Key: Key{Scope: "s", ID: "late"}, Fingerprint: fp, Work: work}}
	outs, errs := g.DoBatch(context.Background(), items, func(claimed []int, work func(int) error) {
		_ = work(claimed[0])
		time.Sleep(200 * time.Millisecond) // past the deadline: 600ms - 500ms after the claim
		_ = work(claimed[1])
	})
	if outs[0].Kind != Executed || outs[1].Kind != Unavailable || !errors.Is(errs[1], errClaimTooLate) {
		t.Fatalf("outcomes %v %v (%v); want executed, then unavailable with the late-claim error", outs[0].Kind, outs[1].Kind, errs[1])
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("work ran %d times; want 1", n)
	}
}
