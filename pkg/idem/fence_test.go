package idem

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fenceOf runs one call of key that fails or succeeds as told, and returns its token.
func fenceOf(t *testing.T, g *Guard, key Key, succeed bool) uint64 {
	t.Helper()
	var fence uint64
	var ok bool
	out, err := g.Do(context.Background(), key, Fingerprint{}, func(ctx context.Context) (Result, error) {
		fence, ok = FenceFrom(ctx)
		if !succeed {
			return Result{}, errors.New("refused")
		}
		return Result{Status: 200}, nil
	})
	if !ok || fence == 0 {
		t.Fatalf("work ran without a token (%v, %v): %v, %v", fence, ok, out.Kind, err)
	}
	return fence
}

// Every claim of a key carries a token larger than every earlier claim's: after a release, after
// a completion whose result expired, after a claim that expired under its work, after the
// counter key is lost, and for the items of a batch.
func testFenceIncreases(t *testing.T, b backend) {
	c := b.newClient(t)
	g := b.guard(t, c, WithFencing(), WithResultTTL(50*time.Millisecond), WithLockTTL(600*time.Millisecond))
	key := Key{Scope: "fence", ID: "evt_fence"}
	var last uint64
	next := func(step string, f uint64) {
		t.Helper()
		if f <= last {
			t.Fatalf("%s: token %d, not above the earlier %d", step, f, last)
		}
		last = f
	}
	next("first claim, released", fenceOf(t, g, key, false))
	next("after a release, completed", fenceOf(t, g, key, true))
	b.advance(100 * time.Millisecond) // the result expires
	next("after a completion", fenceOf(t, g, key, false))

	// A claim that expires while its work runs.
	out, _ := g.Do(context.Background(), key, Fingerprint{}, func(ctx context.Context) (Result, error) {
		f, _ := FenceFrom(ctx)
		next("claim left to expire", f)
		b.advance(700 * time.Millisecond)
		return Result{Status: 200}, nil
	})
	if out.Kind != LockLost {
		t.Fatalf("claim left to expire: %v; want LockLost", out.Kind)
	}
	next("after an expiry", fenceOf(t, g, key, false))

	if err := c.Del(context.Background(), key.redisKey(b.prefix)+fenceSuffix).Err(); err != nil {
		t.Fatal(err)
	}
	next("after the counter was lost", fenceOf(t, g, key, false))

	other := Key{Scope: "fence", ID: "evt_fence_other"}
	var fences [2]uint64
	outs, errs := g.DoBatch(context.Background(), []Item{
		{Key: key, Work: func(ctx context.Context) (Result, error) { fences[0], _ = FenceFrom(ctx); return Result{}, nil }},
		{Key: other, Work: func(ctx context.Context) (Result, error) { fences[1], _ = FenceFrom(ctx); return Result{}, nil }},
	}, nil)
	if outs[0].Kind != Executed || outs[1].Kind != Executed || fences[1] == 0 {
		t.Fatalf("batch: %v %v, %v; tokens %v", outs[0].Kind, outs[1].Kind, errs, fences)
	}
	next("a batch's claim", fences[0])
}

// A retried claim whose first reply was lost finds its own record, and its token with it.
func testFencedClaimRetriedFindsItsToken(t *testing.T, b backend) {
	g := b.guard(t, b.newClient(t), WithFencing())
	c := &call{}
	key := Key{Scope: "fence", ID: "evt_retried"}
	if _, ok, _ := g.start(c, key, Fingerprint{}, time.Now()); !ok {
		t.Fatal("start")
	}
	c.deadlines(context.Background(), g.opts)
	ctx := context.Background()
	if _, _, err := g.claimFenced(ctx, c); err == nil || c.fence == 0 {
		t.Fatalf("first claim: %v, token %d; want a free key and a token", err, c.fence)
	}
	first := c.fence
	c.fence = 0
	stored, _, err := g.claimFenced(ctx, c)
	if err != nil {
		t.Fatalf("retried claim: %v", err)
	}
	out, claimed, err := g.claimed(c, Outcome{}, []byte(stored), err)
	if !claimed || c.fence != first {
		t.Fatalf("retried claim: %v %v claimed=%v, token %d; want ours again with token %d", out.Kind, err, claimed, c.fence, first)
	}
}

func TestFenceIncreasesOnMiniredis(t *testing.T) { testFenceIncreases(t, miniredisBackend(t)) }
func TestFenceIncreasesOnRealRedis(t *testing.T) { testFenceIncreases(t, sharedRedisBackend(t)) }
func TestFenceIncreasesOnRedisCluster(t *testing.T) {
	testFenceIncreases(t, clusterBackend(t))
}
func TestFencedClaimRetriedFindsItsToken(t *testing.T) {
	testFencedClaimRetriedFindsItsToken(t, sharedRedisBackend(t))
}

// A guard without fencing gives its work no token, and hides one the caller's context carries.
func TestWithoutFencingTheWorkHasNoToken(t *testing.T) {
	b := miniredisBackend(t)
	g := b.guard(t, b.newClient(t))
	ctx := ContextWithFence(context.Background(), 7)
	g.Do(ctx, Key{Scope: "fence", ID: "none"}, Fingerprint{}, func(ctx context.Context) (Result, error) {
		if f, ok := FenceFrom(ctx); ok {
			t.Errorf("token %d in the work of a guard without fencing", f)
		}
		return Result{}, nil
	})
	if f, ok := FenceFrom(ctx); !ok || f != 7 {
		t.Fatalf("ContextWithFence: %d, %v", f, ok)
	}
}

// The fenced first execution keeps the budget: 2 round trips once the scripts are known.
func TestFencedFirstExecutionCostsTwoRoundTrips(t *testing.T) {
	b := sharedRedisBackend(t)
	g := b.guard(t, b.newClient(t), WithFencing())
	if err := g.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, err := g.Do(context.Background(), Key{Scope: "fence", ID: "budget"}, Fingerprint{}, okWork("x"))
	if err != nil || out.Kind != Executed || out.RoundTrips != 2 {
		t.Fatalf("%v, %v, %d round trips; want Executed in 2", out.Kind, err, out.RoundTrips)
	}
	out, _ = g.Do(context.Background(), Key{Scope: "fence", ID: "budget"}, Fingerprint{}, okWork("x"))
	if out.Kind != Replayed || out.RoundTrips != 1 {
		t.Fatalf("replay: %v in %d round trips; want 1", out.Kind, out.RoundTrips)
	}
}

// untimedDeadline is a work deadline at at whose timed context has no timer: it never ends by
// itself, as a timer that has not fired yet.
func untimedDeadline(t *testing.T, at time.Time) *workDeadline {
	inner, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := &workDeadline{parent: context.Background(), at: at}
	d.timed.Store(&timedContext{inner, cancel})
	return d
}

// A work that never waits on its context costs no timer; its Err still reads the clock, its
// Deadline and Value are the context's, and its release ends it.
func TestWorkContextMakesItsTimerOnlyForDone(t *testing.T) {
	type valueKey struct{}
	parent := context.WithValue(context.Background(), valueKey{}, "v")
	w := newWorkContext(parent, time.Now().Add(20*time.Millisecond), &call{}, false)
	release := w.release
	if err := w.Err(); err != nil {
		t.Fatalf("before the deadline: %v", err)
	}
	if at, ok := w.Deadline(); !ok || !at.Equal(w.d.at) {
		t.Fatalf("Deadline %v %v; want %v", at, ok, w.d.at)
	}
	if w.Value(valueKey{}) != "v" {
		t.Fatal("the caller's value is lost")
	}
	if w.d.timed.Load() != nil {
		t.Fatal("a timer was made without Done")
	}
	for time.Now().Before(w.d.at) {
		time.Sleep(time.Millisecond)
	}
	if err := w.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the deadline: Err %v; want DeadlineExceeded", err)
	}
	if err := context.Cause(w); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the deadline: Cause %v; want DeadlineExceeded", err)
	}
	release()

	// Released before its deadline, with no timer: Canceled, and Done closed.
	w = newWorkContext(parent, time.Now().Add(time.Hour), &call{}, false)
	release = w.release
	release()
	if err := w.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("released: Err %v; want Canceled", err)
	}
	if !isDone(w) {
		t.Fatal("released: Done not closed")
	}

	// The caller's cancellation reaches a work that has no timer yet, and its descendants.
	caller, cancel := context.WithCancel(parent)
	w = newWorkContext(caller, time.Now().Add(time.Hour), &call{}, false)
	release = w.release
	defer release()
	child, stop := context.WithCancel(w)
	defer stop()
	cancel()
	<-child.Done() // a bound: the test's own timeout
	if err := w.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("caller cancelled: Err %v; want Canceled", err)
	}
}

// A work's context ends when its deadline has passed by the clock even if no timer fired: here
// there is no timer at all, as for a process resumed past its deadline before its timers ran.
func TestWorkContextEndsAtTheDeadlineWithoutItsTimer(t *testing.T) {
	d := untimedDeadline(t, time.Now().Add(20*time.Millisecond))
	w := &workContext{d: d}
	if err := w.Err(); err != nil {
		t.Fatalf("before the deadline: %v", err)
	}
	done := w.Done()
	select {
	case <-done:
		t.Fatal("done before the deadline")
	default:
	}
	for time.Now().Before(d.at) {
		time.Sleep(time.Millisecond)
	}
	// A descendant made before the deadline ends with it, on the first look at the parent.
	child, stop := context.WithCancel(w)
	defer stop()
	if err := w.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the deadline: Err %v; want DeadlineExceeded", err)
	}
	select {
	case <-done:
	default:
		t.Fatal("Done not closed past the deadline")
	}
	<-child.Done() // closed by the parent's cancellation; a bound: the test's own timeout
	if err := w.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err changed to %v", err)
	}
}

// Past the deadline, Done alone ends the context, for work that only selects on it.
func TestWorkContextDoneClosesPastTheDeadline(t *testing.T) {
	w := &workContext{d: untimedDeadline(t, time.Now().Add(-time.Millisecond))}
	if !isDone(w) {
		t.Fatal("Done not closed past the deadline")
	}
	if err := w.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err %v; want DeadlineExceeded", err)
	}
}

// Wrap's function reads its claim's token from its context, as Do's work does.
func TestWrapGivesItsFunctionTheToken(t *testing.T) {
	b := miniredisBackend(t)
	g := b.guard(t, b.newClient(t), WithFencing())
	fn := mustWrap(t, g, "orders", func(id string) string { return id }, nil, func(ctx context.Context, id string) (uint64, error) {
		f, _ := FenceFrom(ctx)
		return f, nil
	})
	f, err := fn(context.Background(), "order_1")
	if err != nil || f == 0 {
		t.Fatalf("Wrap: token %d, %v; want one", f, err)
	}
}
