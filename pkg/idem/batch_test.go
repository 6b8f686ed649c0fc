package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/redis/go-redis/v9"
)

// batchOf returns an item per id in scope, whose work counts its runs in runs.
func batchOf(scope string, runs *sync.Map, ids ...string) []Item {
	items := make([]Item, len(ids))
	for i, id := range ids {
		items[i] = Item{Key: Key{Scope: scope, ID: id}, Fingerprint: FingerprintOf([]byte(id)), Work: func(context.Context) (Result, error) {
			n, _ := runs.LoadOrStore(id, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return Result{Status: 200, Body: []byte("done " + id)}, nil
		}}
	}
	return items
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func kinds(outs []Outcome) []Kind {
	k := make([]Kind, len(outs))
	for i, o := range outs {
		k[i] = o.Kind
	}
	return k
}

// runBatchSuite checks DoBatch against one backend.
func runBatchSuite(t *testing.T, b backend) {
	t.Run("NewKeysCostTwoRoundTripsAndReplaysOne", func(t *testing.T) { testBatchRoundTrips(t, b) })
	t.Run("EachKeyKeepsItsOwnOutcome", func(t *testing.T) { testBatchPerKeyOutcomes(t, b) })
	t.Run("KeyTwiceInABatchRunsOnce", func(t *testing.T) { testBatchDuplicateKey(t, b) })
	t.Run("UncalledWorkIsReleased", func(t *testing.T) { testBatchUncalledWork(t, b) })
	t.Run("ConcurrentBatchesExecuteEachKeyOnce", func(t *testing.T) { testBatchConcurrent(t, b) })
	t.Run("LargeBatchGoesInParts", func(t *testing.T) { testBatchInParts(t, b) })
}

func testBatchRoundTrips(t *testing.T, b backend) {
	c := b.newClient(t)
	trips := &testsupport.CommandCounter{}
	c.AddHook(trips)
	g := b.guard(t, c)
	ctx := context.Background()
	var runs sync.Map
	// Warm: every node compiles the scripts, as the first batches of an environment do.
	g.DoBatch(ctx, batchOf("warm", &runs, ids("w", 30)...), nil)
	trips.RoundTrips.Store(0)

	batch := batchOf("batch", &runs, ids("new", 10)...)
	outs, errs := g.DoBatch(ctx, batch, nil)
	for i, o := range outs {
		if o.Kind != Executed || errs[i] != nil || o.RoundTrips != 2 {
			t.Fatalf("item %d: %v, %v, %d round trips; want executed in 2", i, o.Kind, errs[i], o.RoundTrips)
		}
	}
	if n := trips.RoundTrips.Load(); n != 2 {
		t.Fatalf("a batch of 10 new keys took %d round trips, want 2", n)
	}
	trips.RoundTrips.Store(0)
	outs, errs = g.DoBatch(ctx, batch, nil)
	for i, o := range outs {
		if o.Kind != Replayed || errs[i] != nil || string(o.Result.Body) != "done new-"+fmt.Sprint(i) || o.RoundTrips != 1 {
			t.Fatalf("item %d replayed: %v, %v, %q, %d round trips", i, o.Kind, errs[i], o.Result.Body, o.RoundTrips)
		}
	}
	if n := trips.RoundTrips.Load(); n != 1 {
		t.Fatalf("a batch of 10 replays took %d round trips, want 1", n)
	}
	runs.Range(func(id, n any) bool {
		if n.(*atomic.Int32).Load() != 1 {
			t.Errorf("%s ran %d times", id, n.(*atomic.Int32).Load())
		}
		return true
	})
}

func testBatchPerKeyOutcomes(t *testing.T, b backend) {
	c := b.newClient(t)
	g, other := b.guard(t, c), b.guard(t, b.newClient(t))
	ctx := context.Background()
	var runs sync.Map
	done := batchOf("mixed", &runs, "done")[0]
	if out, err := g.Do(ctx, done.Key, done.Fingerprint, done.Work); out.Kind != Executed {
		t.Fatal(out.Kind, err)
	}
	hold, started := make(chan struct{}), make(chan struct{})
	held := Key{Scope: "mixed", ID: "held"}
	go other.Do(ctx, held, Fingerprint{}, func(context.Context) (Result, error) { close(started); <-hold; return Result{}, nil })
	<-started
	defer close(hold)

	errDown := errors.New("sink down")
	items := []Item{
		batchOf("mixed", &runs, "new")[0],
		{Key: Key{Scope: "mixed", ID: "failing"}, Work: func(context.Context) (Result, error) { return Result{}, errDown }},
		done,
		{Key: done.Key, Fingerprint: FingerprintOf([]byte("another payload")), Work: done.Work},
		{Key: held, Work: done.Work},
		{Key: Key{Scope: "bad scope", ID: "x"}, Work: done.Work},
		{Key: Key{Scope: "mixed", ID: "panics"}, Work: func(context.Context) (Result, error) { panic("boom") }},
	}
	outs, errs := g.DoBatch(ctx, items, nil)
	want := []Kind{Executed, Failed, Replayed, Mismatch, InProgress, InvalidKey, Failed}
	if fmt.Sprint(kinds(outs)) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v (errors %v)", kinds(outs), want, errs)
	}
	if !errors.Is(errs[1], errDown) || errs[0] != nil || errs[2] != nil || outs[4].RetryAfter <= 0 {
		t.Fatalf("errors %v, retry after %s", errs, outs[4].RetryAfter)
	}
	if string(outs[2].Result.Body) != "done done" {
		t.Fatalf("replayed %q", outs[2].Result.Body)
	}
	// The failed claims were released: the next batch runs them.
	outs, errs = g.DoBatch(ctx, []Item{{Key: items[1].Key, Work: done.Work}, {Key: items[6].Key, Work: done.Work}}, nil)
	if outs[0].Kind != Executed || outs[1].Kind != Executed {
		t.Fatalf("after the failures: %v %v", kinds(outs), errs)
	}
}

func testBatchDuplicateKey(t *testing.T, b backend) {
	g := b.guard(t, b.newClient(t))
	var runs sync.Map
	items := batchOf("dup", &runs, "same", "other", "same")
	outs, _ := g.DoBatch(context.Background(), items, nil)
	if want := []Kind{Executed, Executed, InProgress}; fmt.Sprint(kinds(outs)) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", kinds(outs), want)
	}
	// Redelivered after the partial failure: the duplicate is now a replay.
	outs, _ = g.DoBatch(context.Background(), items, nil)
	if want := []Kind{Replayed, Replayed, Replayed}; fmt.Sprint(kinds(outs)) != fmt.Sprint(want) {
		t.Fatalf("redelivered: %v, want %v", kinds(outs), want)
	}
	if n, _ := runs.Load("same"); n.(*atomic.Int32).Load() != 1 {
		t.Fatalf("the duplicated message ran %d times", n.(*atomic.Int32).Load())
	}
}

// A run function may stop early, as after a failure in an ordered group: what it did not run
// is released, and runs on the next delivery.
func testBatchUncalledWork(t *testing.T, b backend) {
	c := b.newClient(t)
	g := b.guard(t, c)
	ctx := context.Background()
	var runs sync.Map
	items := batchOf("partial", &runs, ids("m", 6)...)
	var given []int
	outs, errs := g.DoBatch(ctx, items, func(claimed []int, work func(int) error) {
		given = claimed
		for _, i := range claimed[:3] {
			if err := work(i); err != nil {
				t.Errorf("work(%d): %v", i, err)
			}
		}
		if err := work(0); err == nil {
			t.Error("work(0) ran twice")
		}
		if err := work(99); err == nil {
			t.Error("work(99) ran")
		}
	})
	if fmt.Sprint(given) != "[0 1 2 3 4 5]" {
		t.Fatalf("run was given %v", given)
	}
	if want := []Kind{Executed, Executed, Executed, Failed, Failed, Failed}; fmt.Sprint(kinds(outs)) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", kinds(outs), want)
	}
	if !errors.Is(errs[4], errNotRun) {
		t.Fatalf("uncalled item: %v", errs[4])
	}
	for i := 3; i < 6; i++ {
		if n, _ := c.Exists(ctx, items[i].Key.redisKey(b.prefix)).Result(); n != 0 {
			t.Fatalf("item %d not run but its claim is still held", i)
		}
	}
	// Works run concurrently by run are fine too.
	outs, _ = g.DoBatch(ctx, items, func(claimed []int, work func(int) error) {
		var wg sync.WaitGroup
		for _, i := range claimed {
			wg.Go(func() { _ = work(i) })
		}
		wg.Wait()
	})
	if want := []Kind{Replayed, Replayed, Replayed, Executed, Executed, Executed}; fmt.Sprint(kinds(outs)) != fmt.Sprint(want) {
		t.Fatalf("redelivered: %v, want %v", kinds(outs), want)
	}
}

// 8 batches of the same 10 keys from 4 environments at once: each key runs exactly once.
func testBatchConcurrent(t *testing.T, b backend) {
	guards := make([]*Guard, 4)
	for i := range guards {
		guards[i] = b.guard(t, b.newClient(t))
	}
	var runs sync.Map
	keys := ids("k", 10)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			items := batchOf("concurrent", &runs, keys...)
			for j := range items {
				w := items[j].Work
				items[j].Work = func(ctx context.Context) (Result, error) { time.Sleep(5 * time.Millisecond); return w(ctx) }
			}
			<-start
			outs, errs := guards[i%len(guards)].DoBatch(context.Background(), items, nil)
			for j, o := range outs {
				if o.Kind != Executed && o.Kind != Replayed && o.Kind != InProgress {
					t.Errorf("batch %d item %d: %v %v", i, j, o.Kind, errs[j])
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for _, id := range keys {
		n, ok := runs.Load(id)
		if !ok || n.(*atomic.Int32).Load() != 1 {
			t.Fatalf("%s did not run exactly once", id)
		}
	}
}

// partsHook records the keys of each pipeline and of each script call in it.
type partsHook struct {
	mu        sync.Mutex
	pipelines []int // keys per pipeline
	calls     []int // keys per script call
}

func (h *partsHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *partsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *partsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		keys := 0
		for _, cmd := range cmds {
			if name := cmd.Name(); name == "evalsha" || name == "eval" {
				h.calls = append(h.calls, cmd.Args()[2].(int))
				keys += cmd.Args()[2].(int)
			} else {
				keys++
			}
		}
		h.pipelines = append(h.pipelines, keys)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// A batch larger than a pipeline goes in parts: pipelines of at most pipelineKeys keys, one
// after another, and finish calls of at most scriptKeys keys (one on a cluster), so that no
// script holds Redis for long; every key keeps its own outcome across the parts.
func testBatchInParts(t *testing.T, b backend) {
	c := b.newClient(t)
	g := b.guard(t, c)
	ctx := context.Background()
	var runs sync.Map
	g.DoBatch(ctx, batchOf("warm", &runs, ids("w", 3)...), nil) // the scripts compiled
	parts := &partsHook{}
	c.AddHook(parts)
	const n = 2*pipelineKeys + pipelineKeys/2 // 3 pipelines of claims, 3 of finish calls
	batch := batchOf("parts", &runs, ids("p", n)...)
	for i := 0; i < n; i += 7 {
		batch[i].Work = func(context.Context) (Result, error) { return Result{}, errors.New("refused") }
	}
	outs, errs := g.DoBatch(ctx, batch, nil)
	for i, o := range outs {
		want := Executed
		if i%7 == 0 {
			want = Failed
		}
		if o.Kind != want || o.RoundTrips != 6 {
			t.Fatalf("item %d: %v (%v) in %d round trips, want %v in 6", i, o.Kind, errs[i], o.RoundTrips, want)
		}
	}
	parts.wantWithinLimits(t, c, n)
	// The failed items were released, the others stored: again, the first run, the others replay.
	outs, errs = g.DoBatch(ctx, batch, nil)
	for i, o := range outs {
		want := Replayed
		if i%7 == 0 {
			want = Failed
		}
		if o.Kind != want {
			t.Fatalf("item %d again: %v (%v), want %v", i, o.Kind, errs[i], want)
		}
	}
}

// wantWithinLimits checks the parts the hook saw of a batch of n new keys on c: 6 pipelines of
// at most pipelineKeys keys, and finish calls of 1 to scriptKeys keys on one node (1 on a
// cluster) that cover the n keys.
func (h *partsHook) wantWithinLimits(t *testing.T, c redis.UniversalClient, n int) {
	t.Helper()
	perCall := 1
	if _, single := c.(*redis.Client); single {
		perCall = scriptKeys
	}
	keys := 0
	for _, k := range h.calls {
		if k < 1 || k > perCall {
			t.Fatalf("a finish call of %d keys, want 1 to %d", k, perCall)
		}
		keys += k
	}
	if keys != n {
		t.Fatalf("finish calls for %d keys, want %d", keys, n)
	}
	// On a cluster the client splits each pipeline by node, and the hook sees it whole.
	if len(h.pipelines) != 6 {
		t.Fatalf("%d pipelines (%v), want 6", len(h.pipelines), h.pipelines)
	}
	for j, keys := range h.pipelines {
		if keys > pipelineKeys {
			t.Fatalf("pipeline %d of %d keys, more than %d", j, keys, pipelineKeys)
		}
	}
}

func TestBatchOnMiniredis(t *testing.T)    { runBatchSuite(t, miniredisBackend(t)) }
func TestBatchOnRealRedis(t *testing.T)    { runBatchSuite(t, sharedRedisBackend(t)) }
func TestBatchOnRedisCluster(t *testing.T) { runBatchSuite(t, clusterBackend(t)) }

// After SCRIPT FLUSH (a failover, a restart) the completions of a batch are answered NOSCRIPT and
// sent again with the scripts' source: one more round trip, once.
func TestBatchAfterScriptFlushSendsTheSourceAgain(t *testing.T) {
	c := testsupport.StartRedis(t).NewClient()
	trips := &testsupport.CommandCounter{}
	c.AddHook(trips)
	g, _ := New(c)
	ctx := context.Background()
	var runs sync.Map
	g.DoBatch(ctx, batchOf("flush", &runs, ids("a", 4)...), nil)
	c.ScriptFlush(ctx)
	trips.RoundTrips.Store(0)
	outs, errs := g.DoBatch(ctx, batchOf("flush", &runs, ids("b", 4)...), nil)
	for i, o := range outs {
		if o.Kind != Executed || o.RoundTrips != 3 {
			t.Fatalf("item %d: %v %v in %d round trips, want executed in 3", i, o.Kind, errs[i], o.RoundTrips)
		}
	}
	trips.RoundTrips.Store(0)
	g.DoBatch(ctx, batchOf("flush", &runs, ids("c", 4)...), nil)
	if n := trips.RoundTrips.Load(); n != 2 {
		t.Fatalf("next batch: %d round trips, want 2", n)
	}
}
