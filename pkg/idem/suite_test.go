package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/redis/go-redis/v9"
)

// backend is one kind of store the same behaviour is checked against.
type backend struct {
	// newClient returns a client with its own connection pool: a separate execution environment.
	newClient func(t *testing.T) redis.UniversalClient
	prefix    string
	// opts are added to every guard's options (WithFencing for the fenced suites).
	opts []Option
	// advance lets d pass in the store's clock, so TTLs run out.
	advance func(d time.Duration)
}

func miniredisBackend(t *testing.T) backend {
	mr := testsupport.StartMiniredis(t)
	return backend{
		newClient: func(*testing.T) redis.UniversalClient { return mr.NewClient() },
		prefix:    "idem",
		advance:   mr.FastForward,
	}
}

func sharedRedisBackend(t *testing.T) backend {
	testsupport.SharedRedis(t)
	return backend{
		newClient: func(t *testing.T) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr(), PoolSize: 64})
			t.Cleanup(func() { c.Close() })
			return c
		},
		prefix:  testsupport.UniquePrefix(t) + "idem",
		advance: time.Sleep,
	}
}

func clusterBackend(t *testing.T) backend {
	cl := testsupport.StartCluster(t, 3, 0)
	return backend{
		newClient: func(t *testing.T) redis.UniversalClient {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: 64})
			t.Cleanup(func() { c.Close() })
			return c
		},
		prefix:  "idem",
		advance: time.Sleep,
	}
}

func (b backend) guard(t *testing.T, c redis.UniversalClient, opts ...Option) *Guard {
	t.Helper()
	g, err := New(c, append(append([]Option{WithPrefix(b.prefix)}, b.opts...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func okWork(body string) Work {
	return func(context.Context) (Result, error) {
		return Result{Status: 200, Headers: map[string]string{"content-type": "application/json"}, Body: []byte(body)}, nil
	}
}

// failWork is work that fails.
func failWork(context.Context) (Result, error) { return Result{}, errors.New("x") }

// warmUp loads both of g's scripts into the server's cache, as the first calls of an
// environment do.
func warmUp(g *Guard, fp Fingerprint) {
	g.Do(context.Background(), Key{Scope: "warm", ID: "ok"}, fp, okWork("x"))
	g.Do(context.Background(), Key{Scope: "warm", ID: "fail"}, fp, failWork)
}

// holdClaim starts g.Do of key with work that waits until the test ends, and returns once the
// key is claimed.
func holdClaim(t *testing.T, g *Guard, key Key, fp Fingerprint) {
	hold, claimed := make(chan struct{}), make(chan struct{})
	go g.Do(context.Background(), key, fp, func(context.Context) (Result, error) {
		close(claimed)
		<-hold
		return Result{Status: 200}, nil
	})
	<-claimed
	t.Cleanup(func() { close(hold) })
}

// suite is the behaviour checked against every backend: the core's, then Wrap's.
var suite = []struct {
	name string
	run  func(*testing.T, backend)
}{
	{"FirstDeliveryExecutesThenReplays", testFirstDeliveryExecutesThenReplays},
	{"InProgressDuplicateIsRefused", testInProgressDuplicateIsRefused},
	{"DifferentPayloadIsMismatch", testDifferentPayloadIsMismatch},
	{"FailureReleasesClaimAndCachesNothing", testFailureReleasesClaim},
	{"ResultTooLargeRunsOnceAndIsNotReplayable", testResultTooLargeRunsOnce},
	{"WrapResultTooLargeRunsOnceAndIsNotReplayable", testWrapResultTooLargeRunsOnce},
	{"BatchResultTooLargeRunsOnceAndIsNotReplayable", testBatchResultTooLargeRunsOnce},
	{"SuccessAfterTheDeadlineIsStoredWhileTheClaimIsOurs", testSuccessAfterTheDeadlineIsStored},
	{"ExpiredClaimIsNotOverwrittenByLateOwner", testExpiredClaimIsNotOverwrittenByLateOwner},
	{"LateFailureDoesNotReleaseNewOwnersClaim", testLateFailureDoesNotReleaseNewOwnersClaim},
	{"ConcurrentEnvironmentsExecuteOnce", testConcurrentEnvironmentsExecuteOnce},
	{"EveryKeyHasAnExpiry", testEveryKeyHasAnExpiry},
	{"WrapConcurrentCallsWithOneKeyExecuteOnce", testWrapConcurrentCallsExecuteOnce},
	{"WrapFailedCallReleasesTheClaim", testWrapFailureReleasesClaim},
	{"WrapReplayReturnsTheFirstResultDecoded", testWrapReplayDecodes},
	{"WrapKeyWithAnotherInputIsMismatch", testWrapMismatch},
	{"WrapDefaultKeyIsTheWholeInput", testWrapDefaultKey},
}

// runSuite checks the suite against one backend.
func runSuite(t *testing.T, b backend) {
	for _, tc := range suite {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, b) })
	}
}

func testFirstDeliveryExecutesThenReplays(t *testing.T, b backend) {
	g := b.guard(t, b.newClient(t))
	ctx := context.Background()
	key := Key{Scope: "stripe", ID: "evt_first"}
	fp := FingerprintOf([]byte(`{"id":"evt_first"}`))
	var runs atomic.Int32
	work := func(context.Context) (Result, error) {
		runs.Add(1)
		return Result{Status: 201, Headers: map[string]string{"x-a": "1", "content-type": "application/json"}, Body: []byte(`{"ok":true}`)}, nil
	}
	out, err := g.Do(ctx, key, fp, work)
	if err != nil || out.Kind != Executed {
		t.Fatalf("first delivery: %v, %v", out.Kind, err)
	}
	for range 3 {
		out, err = g.Do(ctx, key, fp, work)
		if err != nil || out.Kind != Replayed {
			t.Fatalf("duplicate: %v, %v", out.Kind, err)
		}
		if out.Result.Status != 201 || string(out.Result.Body) != `{"ok":true}` || out.Result.Headers["x-a"] != "1" {
			t.Fatalf("replayed result differs: %+v", out.Result)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("work ran %d times, want 1", runs.Load())
	}
}

func testInProgressDuplicateIsRefused(t *testing.T, b backend) {
	g1 := b.guard(t, b.newClient(t))
	g2 := b.guard(t, b.newClient(t))
	key := Key{Scope: "github", ID: "delivery-in-progress"}
	fp := FingerprintOf([]byte("payload"))
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan Outcome)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		out, _ := g1.Do(ctx, key, fp, func(context.Context) (Result, error) {
			close(started)
			<-release
			return Result{Status: 200}, nil
		})
		done <- out
	}()
	<-started
	out, err := g2.Do(ctx, key, fp, okWork("second"))
	if out.Kind != InProgress || err == nil {
		t.Fatalf("duplicate while in progress: %v, %v", out.Kind, err)
	}
	// The claim lives until the context's deadline plus the lock margin.
	if out.RetryAfter <= 5*time.Second || out.RetryAfter > 10*time.Second+lockMargin {
		t.Fatalf("RetryAfter = %s, want about 12s", out.RetryAfter)
	}
	close(release)
	if first := <-done; first.Kind != Executed {
		t.Fatalf("first: %v", first.Kind)
	}
}

func testDifferentPayloadIsMismatch(t *testing.T, b backend) {
	g := b.guard(t, b.newClient(t))
	ctx := context.Background()
	key := Key{Scope: "payments", ID: "key-reused"}
	if out, err := g.Do(ctx, key, FingerprintOf([]byte("a")), okWork("a")); err != nil || out.Kind != Executed {
		t.Fatalf("first: %v %v", out.Kind, err)
	}
	ran := false
	out, err := g.Do(ctx, key, FingerprintOf([]byte("b")), func(context.Context) (Result, error) { ran = true; return Result{}, nil })
	if out.Kind != Mismatch || err == nil || ran {
		t.Fatalf("second with other payload: %v, %v, ran=%v", out.Kind, err, ran)
	}
}

func testFailureReleasesClaim(t *testing.T, b backend) {
	g := b.guard(t, b.newClient(t))
	ctx := context.Background()
	fp := FingerprintOf(nil)
	errSink := errors.New("sink down")
	failures := map[string]Work{
		"error": func(context.Context) (Result, error) { return Result{}, errSink },
		"panic": func(context.Context) (Result, error) { panic("boom") },
		"deadline": func(ctx context.Context) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		},
	}
	for name, work := range failures {
		t.Run(name, func(t *testing.T) {
			key := Key{Scope: "fail", ID: name}
			wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			defer cancel()
			out, err := g.Do(wctx, key, fp, work)
			if out.Kind != Failed || err == nil || strings.Contains(err.Error(), "not released") {
				t.Fatalf("got %v, %v; want Failed with the claim released", out.Kind, err)
			}
			switch name {
			case "error":
				if !errors.Is(err, errSink) {
					t.Fatalf("work error not wrapped: %v", err)
				}
			case "panic":
				if !strings.Contains(err.Error(), "panic: boom") || !strings.Contains(err.Error(), "runtime/debug.Stack") {
					t.Fatalf("panic and its stack not reported: %v", err)
				}
			case "deadline":
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("deadline not reported: %v", err)
				}
			}
			// The retry runs the work again: nothing was cached, the claim is gone.
			out, err = g.Do(ctx, key, fp, okWork("retry"))
			if err != nil || out.Kind != Executed {
				t.Fatalf("retry after %s: %v, %v", name, out.Kind, err)
			}
		})
	}
}

// testSuccessAfterTheDeadlineIsStored: work that ignores its cancelled context and succeeds has
// most likely had its effect; while the claim is still ours the result is stored, so the retry
// is a replay rather than a second execution.
func testSuccessAfterTheDeadlineIsStored(t *testing.T, b backend) {
	g := b.guard(t, b.newClient(t))
	key := Key{Scope: "late", ID: "evt_late_success"}
	fp := FingerprintOf(nil)
	wctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	out, err := g.Do(wctx, key, fp, func(ctx context.Context) (Result, error) {
		<-ctx.Done()
		return Result{Status: 200, Body: []byte("late")}, nil
	})
	if out.Kind != Executed || err != nil {
		t.Fatalf("late success: %v, %v; want Executed, its result stored", out.Kind, err)
	}
	var ran bool
	out, err = g.Do(context.Background(), key, fp, func(context.Context) (Result, error) { ran = true; return Result{}, nil })
	if out.Kind != Replayed || err != nil || ran || string(out.Result.Body) != "late" {
		t.Fatalf("retry after a late success: %v, %v, ran=%v, body %q; want the late result replayed", out.Kind, err, ran, out.Result.Body)
	}
}

// expire removes a record as its TTL running out would.
func expire(t *testing.T, c redis.UniversalClient, prefix string, key Key) {
	t.Helper()
	if err := c.Del(context.Background(), key.redisKey(prefix)).Err(); err != nil {
		t.Fatal(err)
	}
}

// The scenario naive locks get wrong: A's claim expires, B claims, A finishes late. A must not
// overwrite B's claim, must learn it lost the lock, and B must complete normally.
func testExpiredClaimIsNotOverwrittenByLateOwner(t *testing.T, b backend) {
	ca, cb := b.newClient(t), b.newClient(t)
	ga, gb := b.guard(t, ca), b.guard(t, cb)
	ctx := context.Background()
	key := Key{Scope: "stripe", ID: "evt_late_owner"}
	fp := FingerprintOf([]byte("same payload"))
	bStarted, bFinish, bDone := make(chan struct{}), make(chan struct{}), make(chan Outcome)
	out, err := ga.Do(ctx, key, fp, func(context.Context) (Result, error) {
		expire(t, ca, b.prefix, key)
		go func() {
			out, _ := gb.Do(ctx, key, fp, func(context.Context) (Result, error) {
				close(bStarted)
				<-bFinish
				return Result{Status: 200, Body: []byte("B")}, nil
			})
			bDone <- out
		}()
		<-bStarted
		return Result{Status: 200, Body: []byte("A")}, nil
	})
	if out.Kind != LockLost || !strings.Contains(fmt.Sprint(err), "another owner") {
		t.Fatalf("late owner A: %v, %v; want LockLost (taken by another owner)", out.Kind, err)
	}
	if string(out.Result.Body) != "A" {
		t.Fatalf("A's own result not returned: %q", out.Result.Body)
	}
	// B's claim is intact: a third delivery sees it in progress.
	if out, _ := gb.Do(ctx, key, fp, okWork("C")); out.Kind != InProgress {
		t.Fatalf("B's claim was disturbed: third delivery got %v", out.Kind)
	}
	close(bFinish)
	if out := <-bDone; out.Kind != Executed {
		t.Fatalf("B: %v", out.Kind)
	}
	if out, _ := ga.Do(ctx, key, fp, okWork("C")); out.Kind != Replayed || string(out.Result.Body) != "B" {
		t.Fatalf("after B completed: %v %q", out.Kind, out.Result.Body)
	}

	// Expired with nobody else holding the key: A learns the claim expired and stores nothing.
	key2 := Key{Scope: "stripe", ID: "evt_expired_alone"}
	out, err = ga.Do(ctx, key2, fp, func(context.Context) (Result, error) {
		expire(t, ca, b.prefix, key2)
		return Result{Status: 200}, nil
	})
	if out.Kind != LockLost || !strings.Contains(fmt.Sprint(err), "expired") {
		t.Fatalf("expired alone: %v, %v", out.Kind, err)
	}
	if n, _ := ca.Exists(ctx, key2.redisKey(b.prefix)).Result(); n != 0 {
		t.Fatalf("late owner wrote a record after its claim expired")
	}
}

// A claim that really expires in the store while its owner is stuck: the owner's work context
// ends first, the claim then expires, B claims, and A's late release leaves B's claim alone.
func testLateFailureDoesNotReleaseNewOwnersClaim(t *testing.T, b backend) {
	ca, cb := b.newClient(t), b.newClient(t)
	const lockTTL = safetyMargin + 300*time.Millisecond
	ga := b.guard(t, ca, WithLockTTL(lockTTL))
	gb := b.guard(t, cb)
	ctx := context.Background()
	key := Key{Scope: "slack", ID: "Ev_stuck"}
	fp := FingerprintOf(nil)
	hold, bClaimed := make(chan struct{}), make(chan struct{})
	defer close(hold)
	out, err := ga.Do(ctx, key, fp, func(wctx context.Context) (Result, error) {
		dl, _ := wctx.Deadline()
		if until := time.Until(dl); until > lockTTL-safetyMargin {
			t.Errorf("work deadline %s away, want at most lock TTL minus safety margin", until)
		}
		<-wctx.Done() // A is stuck past its deadline...
		b.advance(lockTTL)
		go gb.Do(ctx, key, fp, func(context.Context) (Result, error) { // ...its claim expires, B claims
			close(bClaimed)
			<-hold
			return Result{Status: 200}, nil
		})
		<-bClaimed
		return Result{}, errors.New("stuck") // ...and A fails too late.
	})
	if out.Kind != Failed || !strings.Contains(fmt.Sprint(err), "another owner") {
		t.Fatalf("A: %v, %v; want Failed with a release refused because another owner holds the key", out.Kind, err)
	}
	if out, _ := ga.Do(ctx, key, fp, okWork("x")); out.Kind != InProgress {
		t.Fatalf("B's claim gone after A's late release: %v", out.Kind)
	}
}

// 200 goroutines on 4 separate clients race on each new key; the work runs exactly once per key.
func testConcurrentEnvironmentsExecuteOnce(t *testing.T, b backend) {
	const envs, goroutines, keys = 4, 200, 25
	guards := make([]*Guard, envs)
	for i := range guards {
		guards[i] = b.guard(t, b.newClient(t))
	}
	ctx := context.Background()
	for k := range keys {
		key := Key{Scope: "race", ID: fmt.Sprintf("evt_%d", k)}
		fp := FingerprintOf([]byte(key.ID))
		var runs atomic.Int32
		var counts [Failed + 1]atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range goroutines {
			wg.Go(func() {
				<-start
				out, err := guards[i%envs].Do(ctx, key, fp, func(context.Context) (Result, error) {
					runs.Add(1)
					time.Sleep(2 * time.Millisecond)
					return Result{Status: 200, Body: []byte(key.ID)}, nil
				})
				counts[out.Kind].Add(1)
				if out.Kind == Replayed && string(out.Result.Body) != key.ID {
					t.Errorf("replayed body %q", out.Result.Body)
				}
				if err != nil && out.Kind != InProgress {
					t.Errorf("unexpected %v: %v", out.Kind, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if runs.Load() != 1 || counts[Executed].Load() != 1 {
			t.Fatalf("key %d: work ran %d times, %d executed outcomes; want exactly 1", k, runs.Load(), counts[Executed].Load())
		}
		if got := counts[Executed].Load() + counts[Replayed].Load() + counts[InProgress].Load(); got != goroutines {
			t.Fatalf("key %d: %d outcomes were neither executed, replayed nor in progress", k, goroutines-got)
		}
	}
}

// No path leaves a key without an expiry.
func testEveryKeyHasAnExpiry(t *testing.T, b backend) {
	c := b.newClient(t)
	g := b.guard(t, c)
	ctx := context.Background()
	holdClaim(t, g, Key{Scope: "ttl", ID: "in-progress"}, Fingerprint{})
	g.Do(ctx, Key{Scope: "ttl", ID: "completed"}, Fingerprint{}, okWork("done"))
	g.Do(ctx, Key{Scope: "ttl", ID: "failed"}, Fingerprint{}, failWork)
	for _, id := range []string{"in-progress", "completed"} {
		k := Key{Scope: "ttl", ID: id}.redisKey(b.prefix)
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 {
			t.Fatalf("%s: PTTL %v, %v; want a positive expiry", id, ttl, err)
		}
		if id == "completed" && (ttl < defaultResultTTL-time.Minute || ttl > defaultResultTTL) {
			t.Fatalf("completed record TTL %s, want the result TTL %s", ttl, defaultResultTTL)
		}
	}
	if n, _ := c.Exists(ctx, Key{Scope: "ttl", ID: "failed"}.redisKey(b.prefix)).Result(); n != 0 {
		t.Fatalf("failed key left a record")
	}
	if !strings.HasPrefix(Key{Scope: "s", ID: "i"}.redisKey(b.prefix), b.prefix+":{s:") {
		t.Fatal("key layout changed")
	}
}

func TestSuiteOnMiniredis(t *testing.T) { runSuite(t, miniredisBackend(t)) }

// The same behaviour with fencing tokens on: the fenced claim is a script, not SET NX PX GET.
func TestFencedSuiteOnMiniredis(t *testing.T) { runSuite(t, fenced(miniredisBackend(t))) }
func TestFencedSuiteOnRealRedis(t *testing.T) { runSuite(t, fenced(sharedRedisBackend(t))) }
func TestFencedSuiteOnRedisCluster(t *testing.T) {
	runSuite(t, fenced(clusterBackend(t)))
}

func fenced(b backend) backend {
	b.opts = append(b.opts, WithFencing())
	return b
}
func TestSuiteOnRealRedis(t *testing.T)    { runSuite(t, sharedRedisBackend(t)) }
func TestSuiteOnRedisCluster(t *testing.T) { runSuite(t, clusterBackend(t)) }

// A result too large to store, 300 KiB, after the work ran: the claim is not released but
// replaced by a marker, so the work runs once over 5 calls and every retry is NotReplayable.
func testResultTooLargeRunsOnce(t *testing.T, b backend) {
	var observed []Observation
	g := b.guard(t, b.newClient(t), WithObserver(func(o Observation) { observed = append(observed, o) }))
	key := Key{Scope: "large", ID: "evt_300kib"}
	var runs int
	work := func(context.Context) (Result, error) {
		runs++
		return Result{Status: 200, Body: make([]byte, 300<<10)}, nil
	}
	for call := 1; call <= 5; call++ {
		out, err := g.Do(context.Background(), key, Fingerprint{}, work)
		if out.Kind != NotReplayable || !errors.Is(err, ErrNotReplayable) {
			t.Fatalf("call %d: %v, %v; want NotReplayable", call, out.Kind, err)
		}
		if first := call == 1; out.Ran != first || (len(out.Result.Body) == 300<<10) != first {
			t.Fatalf("call %d: Ran %v with a %d-byte result; want the work's result on the first call only", call, out.Ran, len(out.Result.Body))
		}
	}
	if runs != 1 {
		t.Fatalf("the work ran %d times over 5 calls; want 1", runs)
	}
	if len(observed) != 5 || observed[0].Outcome.Kind != NotReplayable || observed[0].Key != key {
		t.Fatalf("observer heard %d observations (%+v); want 5, NotReplayable", len(observed), observed)
	}
}

// The same through DoBatch, the item beside it unaffected: over 5 batches the large item's work
// runs once, the first batch's outcome carries its result, every later one is NotReplayable.
func testBatchResultTooLargeRunsOnce(t *testing.T, b backend) {
	g := b.guard(t, b.newClient(t))
	var large, small int
	items := []Item{
		{Key: Key{Scope: "large", ID: "batch_300kib"}, Work: func(context.Context) (Result, error) {
			large++
			return Result{Status: 200, Body: make([]byte, 300<<10)}, nil
		}},
		{Key: Key{Scope: "large", ID: "batch_small"}, Work: func(context.Context) (Result, error) {
			small++
			return Result{Status: 200, Body: []byte("ok")}, nil
		}},
	}
	for call := 1; call <= 5; call++ {
		outs, errs := g.DoBatch(context.Background(), items, nil)
		first := call == 1
		if outs[0].Kind != NotReplayable || !errors.Is(errs[0], ErrNotReplayable) || outs[0].Ran != first || (len(outs[0].Result.Body) == 300<<10) != first {
			t.Fatalf("batch %d: large item %v (ran %v, %d bytes), %v; want NotReplayable, its result the first time only",
				call, outs[0].Kind, outs[0].Ran, len(outs[0].Result.Body), errs[0])
		}
		if want := map[bool]Kind{true: Executed, false: Replayed}[first]; outs[1].Kind != want {
			t.Fatalf("batch %d: small item %v, %v; want %v", call, outs[1].Kind, errs[1], want)
		}
	}
	if large != 1 || small != 1 {
		t.Fatalf("over 5 batches the large item's work ran %d times, the small one's %d; want 1 each", large, small)
	}
}

// The same through Wrap: the first call returns fn's value, the next ones ErrNotReplayable.
func testWrapResultTooLargeRunsOnce(t *testing.T, b backend) {
	g := b.guard(t, b.newClient(t))
	var runs int
	fn := mustWrap(t, g, "large", func(in string) string { return in }, nil, func(_ context.Context, in string) ([]byte, error) {
		runs++
		return make([]byte, 300<<10), nil
	})
	for call := 1; call <= 5; call++ {
		v, err := fn(context.Background(), "order_300kib")
		switch {
		case call == 1 && (err != nil || len(v) != 300<<10):
			t.Fatalf("first call: %d bytes, %v; want fn's result", len(v), err)
		case call > 1 && !errors.Is(err, ErrNotReplayable):
			t.Fatalf("call %d: %v; want ErrNotReplayable", call, err)
		}
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times over 5 calls; want 1", runs)
	}
}
