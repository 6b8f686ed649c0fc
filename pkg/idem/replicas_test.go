package idem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
)

// countingClient returns a client of addr that counts its round trips.
func countingClient(t *testing.T, addr string) (*redis.Client, *testsupport.CommandCounter) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PipelinePoolSize: -1})
	t.Cleanup(func() { c.Close() })
	n := &testsupport.CommandCounter{}
	c.AddHook(n)
	return c, n
}

// With a replica in sync, a first execution under WithMinReplicas still costs 2 round trips: the
// WAIT rides in the claim's pipeline.
// ackTimeout is the replica timeout of the tests that expect the replica to acknowledge: WAIT
// answers as soon as it has, so a long bound costs nothing when all is well and absorbs a busy
// machine's slow first acknowledgement after a sync.
const ackTimeout = 5 * time.Second

func TestMinReplicasAcknowledgedClaimRunsInTheSameRoundTrips(t *testing.T) {
	r := testsupport.StartReplicated(t)
	c, _ := countingClient(t, r.Primary.Addr())
	g, err := New(c, WithPrefix(testsupport.UniquePrefix(t)), WithMinReplicas(1, ackTimeout))
	if err != nil {
		t.Fatal(err)
	}
	warmUp(g, Fingerprint{})
	ran := 0
	out, err := g.Do(context.Background(), Key{Scope: "s", ID: "acked"}, Fingerprint{}, func(context.Context) (Result, error) {
		ran++
		return Result{Status: 200}, nil
	})
	if out.Kind != Executed || err != nil || ran != 1 || out.RoundTrips != 2 {
		t.Fatalf("Do: %v in %d round trips, ran %d times (%v); want executed once in 2", out.Kind, out.RoundTrips, ran, err)
	}

	// A batch: one WAIT per pipeline, still 2 round trips.
	items := []Item{{Key: Key{Scope: "s", ID: "b1"}, Work: okWork("1")}, {Key: Key{Scope: "s", ID: "b2"}, Work: okWork("2")}}
	outs, errs := g.DoBatch(context.Background(), items, nil)
	for i, o := range outs {
		if o.Kind != Executed || o.RoundTrips != 2 {
			t.Errorf("batch item %d: %v in %d round trips (%v), want executed in 2", i, o.Kind, o.RoundTrips, errs[i])
		}
	}

	// A server that lost its scripts (a failover, SCRIPT FLUSH): the completion and its WAIT go
	// once more with the script's source, one more round trip, and the next call is back to 2.
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for i, trips := range []int{3, 2} {
		id := fmt.Sprintf("after-flush-%d", i)
		out, err := g.Do(context.Background(), Key{Scope: "s", ID: id}, Fingerprint{}, okWork(id))
		if out.Kind != Executed || err != nil || out.RoundTrips != trips {
			t.Fatalf("Do %s: %v in %d round trips (%v); want executed in %d", id, out.Kind, out.RoundTrips, err, trips)
		}
	}
}

// The completion is waited for too, in its own round trip: when the replica acknowledged the
// claim but not the result (its link cut while the work ran), the work is not failed, since it
// ran, but reported NotStored, matching ErrReplicasNotAcknowledged and not ErrUnavailable, and
// the observer hears of it. The result is on the primary: the next call replays it.
func TestMinReplicasUnacknowledgedCompletionIsNotStoredAndStillReplays(t *testing.T) {
	r := testsupport.StartReplicated(t)
	c, _ := countingClient(t, r.Primary.Addr())
	var observed []Kind
	g, err := New(c, WithPrefix(testsupport.UniquePrefix(t)), WithMinReplicas(1, 300*time.Millisecond),
		WithObserver(func(o Observation) { observed = append(observed, o.Outcome.Kind) }))
	if err != nil {
		t.Fatal(err)
	}
	warmUp(g, Fingerprint{})
	key := Key{Scope: "s", ID: "result-unacked"}
	ran := 0
	work := func(context.Context) (Result, error) {
		ran++
		r.Link.Blackhole() // the claim was acknowledged; from now on the replica hears nothing
		return Result{Status: 200, Body: []byte("paid")}, nil
	}
	out, err := g.Do(context.Background(), key, Fingerprint{}, work)
	r.Link.Resume()
	// The claim, the completion, and completionResends more sends of it, none acknowledged.
	if trips := 2 + completionResends; out.Kind != NotStored || !out.Ran || string(out.Result.Body) != "paid" || out.RoundTrips != trips {
		t.Fatalf("Do: %v (ran %v, %q) in %d round trips, %v; want NotStored with the work's result, in %d", out.Kind, out.Ran, out.Result.Body, out.RoundTrips, err, trips)
	}
	if !errors.Is(err, ErrReplicasNotAcknowledged) || errors.Is(err, ErrUnavailable) {
		t.Errorf("Do's error %v; want ErrReplicasNotAcknowledged, not ErrUnavailable (the work ran)", err)
	}
	if len(observed) != 1 || observed[0] != NotStored {
		t.Errorf("observer heard %v; want one NotStored", observed)
	}
	again, err := g.Do(context.Background(), key, Fingerprint{}, work)
	if again.Kind != Replayed || string(again.Result.Body) != "paid" || ran != 1 {
		t.Fatalf("next call: %v %q (%v), work ran %d times; want the result replayed, the work run once", again.Kind, again.Result.Body, err, ran)
	}
}

// resumeOnShortfall is a client hook that resumes link once a pipelined WAIT has answered
// that no replica acknowledged: the replica was slow for exactly one WAIT.
type resumeOnShortfall struct {
	link    *testsupport.Proxy
	resumed atomic.Bool
}

func (h *resumeOnShortfall) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *resumeOnShortfall) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *resumeOnShortfall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if w, ok := cmd.(*redis.IntCmd); ok && cmd.Name() == "wait" && w.Val() == 0 && h.resumed.CompareAndSwap(false, true) {
				h.link.Resume()
			}
		}
		return err
	}
}

// A completion whose WAIT ran out (the replica slow, its link held for the length of one WAIT)
// is sent again with its WAIT, which the replica acknowledges: Executed, in one more round trip,
// and the replica holds the result. The complete script, finding the result already ours, writes
// it again as it is, so that the second WAIT covers it on whichever connection it goes.
func TestMinReplicasSlowCompletionIsSentAgainUntilAcknowledged(t *testing.T) {
	r := testsupport.StartReplicated(t)
	c, _ := countingClient(t, r.Primary.Addr())
	hook := &resumeOnShortfall{link: r.Link}
	c.AddHook(hook)
	prefix := testsupport.UniquePrefix(t)
	var observed []Kind
	g, err := New(c, WithPrefix(prefix), WithMinReplicas(1, 300*time.Millisecond),
		WithObserver(func(o Observation) { observed = append(observed, o.Outcome.Kind) }))
	if err != nil {
		t.Fatal(err)
	}
	warmUp(g, Fingerprint{})
	key := Key{Scope: "s", ID: "result-slow"}
	ran := 0
	out, err := g.Do(context.Background(), key, Fingerprint{}, func(context.Context) (Result, error) {
		ran++
		r.Link.Blackhole()
		return Result{Status: 200, Body: []byte("paid")}, nil
	})
	r.Link.Resume()
	if out.Kind != Executed || err != nil || ran != 1 || out.RoundTrips != 3 {
		t.Fatalf("Do: %v in %d round trips, ran %d times (%v); want executed once, in 3 (the completion sent twice)", out.Kind, out.RoundTrips, ran, err)
	}
	if !hook.resumed.Load() {
		t.Fatal("no WAIT ran out: the test did not slow the replica")
	}
	if len(observed) != 0 {
		t.Errorf("observer heard %v; want nothing", observed)
	}
	replicaHoldsResult(t, r.Replica.Addr(), key.redisKey(prefix), "paid")
}

// slowBatchItems returns 4 items whose works count their runs in ran and blackhole link (the
// replica hears nothing more); the first 3 succeed with "done i", the last fails.
func slowBatchItems(link *testsupport.Proxy, ran *atomic.Int32) []Item {
	items := make([]Item, 4)
	for i := range items {
		items[i] = Item{Key: Key{Scope: "s", ID: "batch-slow-" + strconv.Itoa(i)}, Work: func(context.Context) (Result, error) {
			ran.Add(1)
			link.Blackhole()
			if i == 3 {
				return Result{}, errors.New("declined")
			}
			return Result{Status: 200, Body: []byte("done " + strconv.Itoa(i))}, nil
		}}
	}
	return items
}

// replicaHoldsResult checks that the replica at addr holds a completed record under rk whose
// result's body is body.
func replicaHoldsResult(t *testing.T, addr, rk, body string) {
	t.Helper()
	replica := redis.NewClient(&redis.Options{Addr: addr})
	defer replica.Close()
	stored, err := replica.Get(context.Background(), rk).Bytes()
	if err != nil {
		t.Fatalf("the replica does not hold %s: %v", rk, err)
	}
	if rec, err := decodeRecord(stored); err != nil || !rec.completed || string(rec.result.Body) != body {
		t.Errorf("the replica holds %+v under %s (%v); want the completed result %q", rec, rk, err, body)
	}
}

// The work's deadline does not bound the completion's second send; the invocation's does. Work
// that ends just before its deadline (the invocation's less 500ms) has its completion's WAIT run
// out past it; the completion is still sent again, since that WAIT ends within the invocation,
// and the replica acknowledges it: Executed in 3 round trips.
func TestMinReplicasCompletionIsSentAgainPastTheWorksDeadline(t *testing.T) {
	r := testsupport.StartReplicated(t)
	c, _ := countingClient(t, r.Primary.Addr())
	hook := &resumeOnShortfall{link: r.Link}
	c.AddHook(hook)
	g, err := New(c, WithPrefix(testsupport.UniquePrefix(t)), WithMinReplicas(1, 150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	warmUp(g, Fingerprint{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := g.Do(ctx, Key{Scope: "s", ID: "result-late"}, Fingerprint{}, func(ctx context.Context) (Result, error) {
		deadline, _ := ctx.Deadline()
		r.Link.Blackhole()
		time.Sleep(time.Until(deadline.Add(-50 * time.Millisecond)))
		return Result{Status: 200, Body: []byte("paid")}, nil
	})
	r.Link.Resume()
	if !hook.resumed.Load() {
		t.Fatal("no WAIT ran out: the test did not slow the replica")
	}
	if out.Kind != Executed || err != nil || out.RoundTrips != 3 {
		t.Fatalf("Do: %v in %d round trips (%v); want executed in 3 (the completion sent twice, past the work's deadline)",
			out.Kind, out.RoundTrips, err)
	}
}

// DoBatch waits for its completions too, one WAIT per pipeline, and sends them again as Do
// does: a result the replica acknowledged none of those times is NotStored, the observer hears
// of it, and the next batch replays it from the primary.
func TestMinReplicasUnacknowledgedBatchCompletionIsNotStored(t *testing.T) {
	r := testsupport.StartReplicated(t)
	c, _ := countingClient(t, r.Primary.Addr())
	var observed atomic.Int32
	g, err := New(c, WithPrefix(testsupport.UniquePrefix(t)), WithMinReplicas(1, 300*time.Millisecond),
		WithObserver(func(o Observation) {
			if o.Outcome.Kind == NotStored && errors.Is(o.Err, ErrReplicasNotAcknowledged) {
				observed.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	warmUp(g, Fingerprint{})
	var ran atomic.Int32
	work := func(context.Context) (Result, error) {
		ran.Add(1)
		r.Link.Blackhole()
		return Result{Status: 200, Body: []byte("done")}, nil
	}
	items := make([]Item, 3)
	for i := range items {
		items[i] = Item{Key: Key{Scope: "s", ID: "batch-unacked-" + strconv.Itoa(i)}, Work: work}
	}
	outs, errs := g.DoBatch(context.Background(), items, nil)
	r.Link.Resume()
	// The claims, the completions, and completionResends more sends of them, none acknowledged.
	trips := 2 + completionResends
	for i, o := range outs {
		if o.Kind != NotStored || !o.Ran || o.RoundTrips != trips || !errors.Is(errs[i], ErrReplicasNotAcknowledged) {
			t.Errorf("batch item %d: %v (ran %v) in %d round trips (%v); want NotStored, replicas not acknowledged, in %d", i, o.Kind, o.Ran, o.RoundTrips, errs[i], trips)
		}
	}
	if n := observed.Load(); n != int32(len(items)) {
		t.Errorf("observer heard %d NotStored outcomes; want %d", n, len(items))
	}
	outs, errs = g.DoBatch(context.Background(), items, nil)
	for i, o := range outs {
		if o.Kind != Replayed || string(o.Result.Body) != "done" {
			t.Errorf("next batch, item %d: %v %q (%v); want the result replayed", i, o.Kind, o.Result.Body, errs[i])
		}
	}
	if n := ran.Load(); n != int32(len(items)) {
		t.Errorf("the works ran %d times; want once each, %d", n, len(items))
	}
}

// A batch's completions whose WAIT ran out (the replica slow for the length of one WAIT) are
// sent again with their WAIT, which the replica acknowledges: every item Executed, in one more
// round trip, the replica holding every result. An item whose work failed is released once and
// not sent again.
func TestMinReplicasSlowBatchCompletionIsSentAgainUntilAcknowledged(t *testing.T) {
	r := testsupport.StartReplicated(t)
	c, cc := countingClient(t, r.Primary.Addr())
	hook := &resumeOnShortfall{link: r.Link}
	c.AddHook(hook)
	prefix := testsupport.UniquePrefix(t)
	var observed atomic.Int32
	g, err := New(c, WithPrefix(prefix), WithMinReplicas(1, 300*time.Millisecond),
		WithObserver(func(Observation) { observed.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	warmUp(g, Fingerprint{})
	var ran atomic.Int32
	items := slowBatchItems(r.Link, &ran)
	before := cc.RoundTrips.Load()
	outs, errs := g.DoBatch(context.Background(), items, nil)
	r.Link.Resume()
	if !hook.resumed.Load() {
		t.Fatal("no WAIT ran out: the test did not slow the replica")
	}
	for i, o := range outs {
		want, trips := Executed, 3 // the completions sent twice
		if i == 3 {
			want = Failed
		}
		if o.Kind != want || (want == Executed && (errs[i] != nil || o.RoundTrips != trips)) {
			t.Errorf("batch item %d: %v in %d round trips (%v); want %v in %d", i, o.Kind, o.RoundTrips, errs[i], want, trips)
		}
	}
	if n := cc.RoundTrips.Load() - before; n != 3 {
		t.Errorf("the client made %d round trips; want 3", n)
	}
	if n, err := c.Exists(context.Background(), items[3].Key.redisKey(prefix)).Result(); err != nil || n != 0 {
		t.Errorf("the failed item's claim is still stored (%d, %v); want released", n, err)
	}
	if n := observed.Load(); n != 0 {
		t.Errorf("observer heard %d outcomes; want none", n)
	}
	for i, it := range items[:3] {
		replicaHoldsResult(t, r.Replica.Addr(), it.Key.redisKey(prefix), "done "+strconv.Itoa(i))
	}
	if n := ran.Load(); n != int32(len(items)) {
		t.Errorf("the works ran %d times; want once each, %d", n, len(items))
	}
}

func TestMinReplicasUnacknowledgedClaimIsReleasedAndNothingRuns(t *testing.T) {
	srv := testsupport.StartRedis(t) // no replica at all
	c, _ := countingClient(t, srv.Addr())
	prefix := testsupport.UniquePrefix(t)
	g, err := New(c, WithPrefix(prefix), WithMinReplicas(1, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ran := 0
	work := func(context.Context) (Result, error) { ran++; return Result{Status: 200}, nil }
	key := Key{Scope: "s", ID: "alone"}
	out, err := g.Do(ctx, key, Fingerprint{}, work)
	if out.Kind != Unavailable || ran != 0 {
		t.Fatalf("Do: %v, ran %d times (%v); want unavailable, not run", out.Kind, ran, err)
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrReplicasNotAcknowledged) {
		t.Errorf("Do's error %v matches neither ErrUnavailable nor ErrReplicasNotAcknowledged", err)
	}
	if n, err := c.Exists(ctx, key.redisKey(prefix)).Result(); err != nil || n != 0 {
		t.Errorf("the unacknowledged claim is still stored (%d, %v), want released", n, err)
	}

	wrapped := mustWrap(t, g, "w", func(s string) string { return s }, nil, func(context.Context, string) (string, error) {
		ran++
		return "done", nil
	})
	if _, err := wrapped(ctx, "k"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrReplicasNotAcknowledged) {
		t.Errorf("Wrap: %v, want ErrUnavailable and ErrReplicasNotAcknowledged", err)
	}

	items := []Item{{Key: Key{Scope: "s", ID: "b1"}, Work: work}, {Key: Key{Scope: "s", ID: "b2"}, Work: work}}
	outs, errs := g.DoBatch(ctx, items, nil)
	for i, o := range outs {
		if o.Kind != Unavailable || !errors.Is(errs[i], ErrReplicasNotAcknowledged) {
			t.Errorf("batch item %d: %v (%v), want unavailable, replicas not acknowledged", i, o.Kind, errs[i])
		}
		if n, _ := c.Exists(ctx, items[i].Key.redisKey(prefix)).Result(); n != 0 {
			t.Errorf("batch item %d: its claim is still stored, want released", i)
		}
	}
	if ran != 0 {
		t.Errorf("work ran %d times without the replica's acknowledgement", ran)
	}
}

// On a cluster the WAIT goes to the node of the key, whose own replica acknowledges it.
func TestMinReplicasOnClusterWaitsOnTheKeysNode(t *testing.T) {
	for _, tc := range []struct {
		replicas int
		want     Kind
	}{{1, Executed}, {0, Unavailable}} {
		cl := testsupport.StartCluster(t, 3, tc.replicas)
		c := cl.NewClient()
		t.Cleanup(func() { c.Close() })
		if tc.replicas > 0 {
			waitForReplicas(t, c, tc.replicas)
		}
		timeout := 200 * time.Millisecond // no replica: each claim waits for it in vain
		if tc.replicas > 0 {
			timeout = ackTimeout
		}
		g, err := New(c, WithPrefix("replicas"), WithMinReplicas(1, timeout))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var items []Item
		for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
			items = append(items, Item{Key: Key{Scope: "s", ID: id}, Work: okWork(id)})
			out, err := g.Do(ctx, Key{Scope: "one", ID: id}, Fingerprint{}, okWork(id))
			if out.Kind != tc.want {
				t.Errorf("%d replicas per master, key %s: %v (%v), want %v", tc.replicas, id, out.Kind, err, tc.want)
			}
		}
		outs, errs := g.DoBatch(ctx, items, nil)
		for i, o := range outs {
			if o.Kind != tc.want {
				t.Errorf("%d replicas per master, batch item %d: %v (%v), want %v", tc.replicas, i, o.Kind, errs[i], tc.want)
			}
		}
	}
}

// waitForReplicas waits, with a bound, until a write on every master of c is acknowledged by n
// of its replicas. A replica links up a moment after the cluster starts, and the first write
// after its sync may take longer to acknowledge than the guard's timeout on a busy machine; a
// WAIT on a connection that wrote nothing proves neither, so each master gets a real write.
func waitForReplicas(t *testing.T, c *redis.ClusterClient, n int) {
	t.Helper()
	ctx := context.Background()
	var counted atomic.Int32 // ForEachMaster calls its function on every master at once
	if err := c.ForEachMaster(ctx, func(context.Context, *redis.Client) error { counted.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	masters := int(counted.Load())
	acked := map[string]bool{}
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for i := 0; i < 64 && len(acked) < masters; i++ {
			key := fmt.Sprintf("replicas-probe-%d", i)
			m, err := c.MasterForKey(ctx, key)
			if err != nil {
				last = err
				continue
			}
			addr := m.Options().Addr
			if acked[addr] {
				continue
			}
			pipe := m.Pipeline()
			pipe.Set(ctx, key, "1", time.Minute)
			wait := pipe.Do(ctx, "wait", n, 100)
			if _, err := pipe.Exec(ctx); err != nil {
				last = fmt.Errorf("%s: %w", addr, err)
				continue
			}
			if got, _ := wait.Int(); got < n {
				last = fmt.Errorf("%s: %d of %d replicas acknowledged a write", addr, got, n)
				continue
			}
			acked[addr] = true
		}
		if len(acked) == masters {
			return
		}
	}
	t.Fatalf("replicas not in sync: %d of %d masters acknowledged: %v", len(acked), masters, last)
}

func TestMinReplicasOptionIsValidated(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { c.Close() })
	for _, opt := range []Option{WithMinReplicas(-1, time.Second), WithMinReplicas(1, 0), WithMinReplicas(1, 500*time.Microsecond)} {
		if _, err := New(c, opt); err == nil {
			t.Error("New accepted an invalid WithMinReplicas")
		}
	}
	if _, err := New(c, WithMinReplicas(0, 0)); err != nil {
		t.Errorf("WithMinReplicas(0, 0), off: %v", err)
	}
}

// BenchmarkFirstExecutionMinReplicas1 is BenchmarkFirstExecution with WithMinReplicas(1, 1s)
// on a private primary whose one replica is in sync on loopback, replicating from it directly:
// the claim's pipeline carries the WAIT, so the round trips stay 2 and the cost is the replica's
// acknowledgement.
func BenchmarkFirstExecutionMinReplicas1(b *testing.B) {
	primary := testsupport.StartRedis(b)
	testsupport.StartReplica(b, primary)
	c := benchClientAt(b, primary.Addr())
	g, err := New(c.Client, WithMinReplicas(1, time.Second))
	if err != nil {
		b.Fatal(err)
	}
	g.Do(context.Background(), Key{Scope: "bench", ID: "warm"}, Fingerprint{}, benchWork)
	measure(b, c, doOp(b, g, Executed, newKey))
}
