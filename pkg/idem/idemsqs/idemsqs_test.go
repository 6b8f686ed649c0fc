package idemsqs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemsqs"
)

const (
	standardARN = "arn:aws:sqs:eu-west-1:123456789012:events"
	fifoARN     = "arn:aws:sqs:eu-west-1:123456789012:events.fifo"
)

// mustNew is idemsqs.New for a test whose arguments are valid.
func mustNew[Out any](t testing.TB, g *idem.Guard, fn func(context.Context, events.SQSMessage) (Out, error), opts ...idemsqs.Option) *idemsqs.Handler[Out] {
	t.Helper()
	h, err := idemsqs.New(g, fn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A handler declared before its guard exists (a package-level declaration that runs before
// init sets the guard) is refused at construction, not a panic at the first batch.
func TestNewRefusesANilGuardANilFunctionAndABadScope(t *testing.T) {
	g, err := idem.New(testsupport.StartMiniredis(t).NewClient())
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, events.SQSMessage) (string, error) { return "", nil }
	if h, err := idemsqs.New(nil, fn); h != nil || err == nil {
		t.Errorf("nil guard: %v; want an error and no handler", err)
	}
	if h, err := idemsqs.New[string](g, nil); h != nil || err == nil {
		t.Errorf("nil function: %v; want an error and no handler", err)
	}
	if _, err := idemsqs.New(g, fn, idemsqs.WithScope("two words")); !errors.Is(err, idem.ErrInvalidKey) {
		t.Errorf("bad scope: %v; want idem.ErrInvalidKey", err)
	}
}

// store is one kind of Redis the behaviour is checked against.
type store struct {
	// newClient returns a client with its own pool: a separate execution environment.
	newClient func(t *testing.T) redis.UniversalClient
	prefix    string
}

func stores(t *testing.T) map[string]func(t *testing.T) store {
	return map[string]func(t *testing.T) store{
		"redis": func(t *testing.T) store {
			testsupport.SharedRedis(t)
			return store{
				newClient: func(t *testing.T) redis.UniversalClient {
					c := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr(), PoolSize: 64})
					t.Cleanup(func() { c.Close() })
					return c
				},
				prefix: testsupport.UniquePrefix(t) + "idem",
			}
		},
		"cluster": func(t *testing.T) store {
			cl := testsupport.StartCluster(t, 3, 0)
			return store{
				newClient: func(t *testing.T) redis.UniversalClient {
					c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), PoolSize: 64})
					t.Cleanup(func() { c.Close() })
					return c
				},
				prefix: "idem",
			}
		},
	}
}

func (s store) guard(t *testing.T) *idem.Guard {
	t.Helper()
	g, err := idem.New(s.newClient(t), idem.WithPrefix(s.prefix))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestBehaviour runs every behaviour against a real redis-server and a real 3-node cluster.
func TestBehaviour(t *testing.T) {
	for name, newStore := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			t.Run("ConcurrentDeliveriesOfOneMessageExecuteOnce", func(t *testing.T) { testConcurrentDeliveriesExecuteOnce(t, s) })
			t.Run("FailedRecordReleasesItsClaim", func(t *testing.T) { testFailedRecordReleasesItsClaim(t, s) })
			t.Run("ReplayReturnsTheFirstResult", func(t *testing.T) { testReplayReturnsTheFirstResult(t, s) })
			t.Run("DuplicateInBatchAndRedeliveryProcessEachOnce", func(t *testing.T) { testDuplicateAndRedelivery(t, s) })
			t.Run("InProgressAndFailedRecordsAreListed", func(t *testing.T) { testInProgressAndFailedAreListed(t, s) })
			t.Run("FIFOGroupKeepsOrderAfterFailure", func(t *testing.T) { testFIFOGroupOrder(t, s) })
			t.Run("FIFOGroupWaitsForAnInProgressRecord", func(t *testing.T) { testFIFOInProgressHoldsGroup(t, s) })
			t.Run("KeyFromBody", func(t *testing.T) { testKeyFromBody(t, s) })
			t.Run("ConcurrencyIsBounded", func(t *testing.T) { testConcurrencyIsBounded(t, s) })
			t.Run("BatchOfTenNewRecordsCostsTwoRoundTrips", func(t *testing.T) { testRoundTrips(t, s) })
			t.Run("FIFODuplicateAcrossGroupsWaitsForItsOrigin", func(t *testing.T) { testFIFODuplicateAcrossGroups(t, s) })
		})
	}
}

// msg returns a record of a standard queue (group "") or of a FIFO queue's group.
func msg(id, group, body string) events.SQSMessage {
	m := events.SQSMessage{MessageId: id, Body: body, EventSourceARN: standardARN}
	if group != "" {
		m.EventSourceARN = fifoARN
		m.Attributes = map[string]string{"MessageGroupId": group}
	}
	return m
}

func batch(msgs ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: msgs} }

// failed returns the ids of a response's BatchItemFailures, sorted.
func failed(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	slices.Sort(ids)
	return ids
}

// counter counts the runs of each message and records their order.
type counter struct {
	mu    sync.Mutex
	runs  map[string]int
	order []string
	fail  map[string]bool
}

func newCounter() *counter { return &counter{runs: map[string]int{}, fail: map[string]bool{}} }

type processed struct {
	ID  string
	Run int
}

func (c *counter) process(_ context.Context, m events.SQSMessage) (processed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order = append(c.order, m.MessageId)
	if c.fail[m.MessageId] {
		return processed{}, errors.New("boom")
	}
	c.runs[m.MessageId]++
	return processed{ID: m.MessageId, Run: len(c.order)}, nil
}

func (c *counter) snapshot() (map[string]int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	runs := map[string]int{}
	for k, v := range c.runs {
		runs[k] = v
	}
	return runs, slices.Clone(c.order)
}

func testConcurrentDeliveriesExecuteOnce(t *testing.T, s store) {
	var runs atomic.Int32
	fn := func(context.Context, events.SQSMessage) (string, error) {
		runs.Add(1)
		time.Sleep(20 * time.Millisecond)
		return "done", nil
	}
	// Five execution environments, each with its own client, ten deliveries each.
	var handlers []*idemsqs.Handler[string]
	for range 5 {
		handlers = append(handlers, mustNew(t, s.guard(t), fn))
	}
	var wg sync.WaitGroup
	var executed, other atomic.Int32
	for i := range 50 {
		wg.Go(func() {
			_, recs := handlers[i%5].Run(context.Background(), batch(msg("m-once", "", `{"n":1}`)))
			switch recs[0].Kind {
			case idem.Executed:
				executed.Add(1)
			case idem.InProgress, idem.Replayed:
				other.Add(1)
			default:
				t.Errorf("delivery %d: %v %v", i, recs[0].Kind, recs[0].Err)
			}
		})
	}
	wg.Wait()
	if runs.Load() != 1 || executed.Load() != 1 || other.Load() != 49 {
		t.Fatalf("runs %d, executed %d, others %d; want 1, 1, 49", runs.Load(), executed.Load(), other.Load())
	}
}

func testFailedRecordReleasesItsClaim(t *testing.T, s store) {
	c := newCounter()
	c.fail["m-fail"] = true
	h := mustNew(t, s.guard(t), c.process)
	ev := batch(msg("m-fail", "", `{}`))
	resp, recs := h.Run(context.Background(), ev)
	if got := failed(resp); fmt.Sprint(got) != "[m-fail]" || recs[0].Kind != idem.Failed || recs[0].Err == nil {
		t.Fatalf("failing record: failures %v, %v %v", got, recs[0].Kind, recs[0].Err)
	}
	// Released: the redelivery runs at once, rather than finding the record in progress.
	c.fail["m-fail"] = false
	resp, recs = h.Run(context.Background(), ev)
	if got := failed(resp); len(got) != 0 || recs[0].Kind != idem.Executed {
		t.Fatalf("redelivery: failures %v, %v %v", got, recs[0].Kind, recs[0].Err)
	}
	if runs, _ := c.snapshot(); runs["m-fail"] != 1 {
		t.Fatalf("succeeded %d times", runs["m-fail"])
	}
}

func testReplayReturnsTheFirstResult(t *testing.T, s store) {
	c := newCounter()
	h := mustNew(t, s.guard(t), c.process)
	ev := batch(msg("m-replay", "", `{}`))
	_, first := h.Run(context.Background(), ev)
	// Another environment (another guard, another client) gets the stored result, decoded.
	_, again := mustNew(t, s.guard(t), c.process).Run(context.Background(), ev)
	if first[0].Kind != idem.Executed || again[0].Kind != idem.Replayed {
		t.Fatalf("kinds %v then %v", first[0].Kind, again[0].Kind)
	}
	if again[0].Result != first[0].Result || first[0].Result.ID != "m-replay" {
		t.Fatalf("replayed %+v, first %+v", again[0].Result, first[0].Result)
	}
}

func testDuplicateAndRedelivery(t *testing.T, s store) {
	c := newCounter()
	c.fail["m-b"] = true
	h := mustNew(t, s.guard(t), c.process)
	ev := batch(msg("m-a", "", `{"a":1}`), msg("m-b", "", `{"b":1}`), msg("m-a", "", `{"a":1}`), msg("m-c", "", `{"c":1}`))
	resp, recs := h.Run(context.Background(), ev)
	if got := failed(resp); fmt.Sprint(got) != "[m-b]" {
		t.Fatalf("first delivery: failures %v, want [m-b]", got)
	}
	if !recs[2].Duplicate || recs[2].Kind != idem.Replayed || recs[2].Result != recs[0].Result {
		t.Fatalf("duplicate in batch: %+v", recs[2])
	}
	// SQS delivers the same batch again (m-b failed, the visibility timeout of the others
	// passed before they were deleted): only m-b runs.
	c.fail["m-b"] = false
	resp, recs = h.Run(context.Background(), ev)
	if got := failed(resp); len(got) != 0 {
		t.Fatalf("redelivery: failures %v", got)
	}
	want := []idem.Kind{idem.Replayed, idem.Executed, idem.Replayed, idem.Replayed}
	for i, r := range recs {
		if r.Kind != want[i] {
			t.Fatalf("redelivery record %d: %v, want %v (%v)", i, r.Kind, want[i], r.Err)
		}
	}
	if runs, _ := c.snapshot(); runs["m-a"] != 1 || runs["m-b"] != 1 || runs["m-c"] != 1 {
		t.Fatalf("runs %v, want each once", runs)
	}
}

func testInProgressAndFailedAreListed(t *testing.T, s store) {
	started, release := make(chan struct{}), make(chan struct{})
	slow := mustNew(t, s.guard(t), func(context.Context, events.SQSMessage) (string, error) {
		close(started)
		<-release
		return "slow", nil
	})
	go slow.Run(context.Background(), batch(msg("m-busy", "", `{}`)))
	<-started
	defer close(release)

	c := newCounter()
	c.fail["m-bad"] = true
	h := mustNew(t, s.guard(t), c.process)
	resp, recs := h.Run(context.Background(), batch(msg("m-busy", "", `{}`), msg("m-bad", "", `{}`), msg("m-good", "", `{}`)))
	if got := failed(resp); fmt.Sprint(got) != "[m-bad m-busy]" {
		t.Fatalf("failures %v, want [m-bad m-busy]", got)
	}
	if recs[0].Kind != idem.InProgress || recs[1].Kind != idem.Failed || recs[2].Kind != idem.Executed {
		t.Fatalf("kinds %v %v %v", recs[0].Kind, recs[1].Kind, recs[2].Kind)
	}
}

func testFIFOGroupOrder(t *testing.T, s store) {
	c := newCounter()
	c.fail["a2"] = true
	h := mustNew(t, s.guard(t), c.process)
	ev := batch(msg("a1", "A", `1`), msg("b1", "B", `1`), msg("a2", "A", `2`), msg("b2", "B", `2`), msg("a3", "A", `3`))
	resp, recs := h.Run(context.Background(), ev)
	if got := failed(resp); fmt.Sprint(got) != "[a2 a3]" {
		t.Fatalf("failures %v, want [a2 a3]", got)
	}
	if !errors.Is(recs[4].Err, idemsqs.ErrSkipped) {
		t.Fatalf("a3: %v %v, want skipped", recs[4].Kind, recs[4].Err)
	}
	_, order := c.snapshot()
	if slices.Contains(order, "a3") {
		t.Fatalf("a3 ran after a2 failed: %v", order)
	}
	if i1, i2 := slices.Index(order, "b1"), slices.Index(order, "b2"); i1 < 0 || i2 < i1 {
		t.Fatalf("group B order %v", order)
	}
	// SQS delivers group A again from a2.
	c.fail["a2"] = false
	resp, _ = h.Run(context.Background(), batch(msg("a2", "A", `2`), msg("a3", "A", `3`)))
	if got := failed(resp); len(got) != 0 {
		t.Fatalf("redelivery failures %v", got)
	}
	runs, order := c.snapshot()
	var a []string
	for _, id := range order {
		if id[0] == 'a' && (len(a) == 0 || a[len(a)-1] != id) {
			a = append(a, id)
		}
	}
	if fmt.Sprint(a) != "[a1 a2 a3]" || runs["a1"] != 1 || runs["a2"] != 1 || runs["a3"] != 1 {
		t.Fatalf("group A ran %v (runs %v), want a1 a2 a3 once each", a, runs)
	}
}

// A record that duplicates one of another FIFO group (the same key read from the body) waits for
// it and takes its outcome: its group goes on after a success, and is held back after a failure.
// The works are slow enough that the other workers start.
func testFIFODuplicateAcrossGroups(t *testing.T, s store) {
	for _, bFails := range []bool{false, true} {
		resp, recs, c := runDuplicateAcrossGroups(t, s, bFails)
		runs, order := c.snapshot()
		if bFails {
			wantGroupHeldBack(t, resp, recs, runs, order)
		} else {
			wantGroupGoesOn(t, resp, recs, runs, order)
		}
	}
}

// runDuplicateAcrossGroups runs a1, b1, a2 and a3 of groups A and B, two at a time, a2 carrying
// b1's key in its body, b1 failing when bFails says so. It returns the batch's response and
// records, and the counter of the works that ran.
func runDuplicateAcrossGroups(t *testing.T, s store, bFails bool) (events.SQSEventResponse, []idemsqs.Record[processed], *counter) {
	t.Helper()
	c := newCounter()
	c.fail["b1"] = bFails
	slow := func(ctx context.Context, m events.SQSMessage) (processed, error) {
		time.Sleep(5 * time.Millisecond)
		return c.process(ctx, m)
	}
	h := mustNew(t, s.guard(t), slow, idemsqs.WithConcurrency(2),
		idemsqs.WithKey(func(m events.SQSMessage) (string, error) { return m.Body, nil }))
	tag := fmt.Sprintf("-%s-%v", t.Name(), bFails)
	ev := batch(msg("a1", "A", "x"+tag), msg("b1", "B", "y"+tag), msg("a2", "A", "y"+tag), msg("a3", "A", "z"+tag))
	done := make(chan struct{})
	var resp events.SQSEventResponse
	var recs []idemsqs.Record[processed]
	go func() { resp, recs = h.Run(context.Background(), ev); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch did not finish")
	}
	return resp, recs, c
}

// wantGroupGoesOn checks the batch of runDuplicateAcrossGroups after b1 succeeded: a2 is replayed
// from it, and a3 runs after it.
func wantGroupGoesOn(t *testing.T, resp events.SQSEventResponse, recs []idemsqs.Record[processed], runs map[string]int, order []string) {
	t.Helper()
	if got := failed(resp); len(got) != 0 || !recs[2].Duplicate || recs[2].Kind != idem.Replayed || runs["a3"] != 1 {
		t.Fatalf("failures %v, a2 %v (duplicate %v), runs %v; want a2 replayed from b1 and a3 run", got, recs[2].Kind, recs[2].Duplicate, runs)
	}
	if slices.Index(order, "a3") < slices.Index(order, "b1") {
		t.Fatalf("order %v: a3 ran before b1, which a2 waits for", order)
	}
}

// wantGroupHeldBack checks the batch of runDuplicateAcrossGroups after b1 failed: a2 fails as its
// duplicate, and a3 is skipped.
func wantGroupHeldBack(t *testing.T, resp events.SQSEventResponse, recs []idemsqs.Record[processed], runs map[string]int, order []string) {
	t.Helper()
	if got := failed(resp); fmt.Sprint(got) != "[a2 a3 b1]" {
		t.Fatalf("failures %v, want [a2 a3 b1]", got)
	}
	if !recs[2].Duplicate || recs[2].Kind != idem.Failed || !errors.Is(recs[3].Err, idemsqs.ErrSkipped) {
		t.Fatalf("a2 %v (duplicate %v), a3 %v; want a2 failed as a duplicate of b1, a3 skipped", recs[2].Kind, recs[2].Duplicate, recs[3].Err)
	}
	if runs["a1"] != 1 || slices.Contains(order, "a2") || slices.Contains(order, "a3") {
		t.Fatalf("ran %v (runs %v), want a1 and b1 only", order, runs)
	}
}

// A record of a group claimed elsewhere holds back the rest of the group; one completed before
// (a replay) does not.
func testFIFOInProgressHoldsGroup(t *testing.T, s store) {
	started, release := make(chan struct{}), make(chan struct{})
	slow := mustNew(t, s.guard(t), func(context.Context, events.SQSMessage) (string, error) {
		close(started)
		<-release
		return "slow", nil
	})
	done := make(chan struct{})
	go func() { slow.Run(context.Background(), batch(msg("g1", "G", `1`))); close(done) }()
	<-started

	c := newCounter()
	h := mustNew(t, s.guard(t), c.process)
	ev := batch(msg("g1", "G", `1`), msg("g2", "G", `2`), msg("h1", "H", `1`))
	resp, _ := h.Run(context.Background(), ev)
	if got := failed(resp); fmt.Sprint(got) != "[g1 g2]" {
		t.Fatalf("failures %v, want [g1 g2]", got)
	}
	if runs, _ := c.snapshot(); runs["g2"] != 0 || runs["h1"] != 1 {
		t.Fatalf("runs %v: g2 must wait for g1, h1 must run", runs)
	}
	close(release)
	<-done
	resp, recs := h.Run(context.Background(), ev)
	if got := failed(resp); len(got) != 0 || recs[0].Kind != idem.Replayed || recs[1].Kind != idem.Executed {
		t.Fatalf("after g1 completed: failures %v, kinds %v %v", got, recs[0].Kind, recs[1].Kind)
	}
}

func testKeyFromBody(t *testing.T, s store) {
	c := newCounter()
	h := mustNew(t, s.guard(t), c.process, idemsqs.WithKey(func(m events.SQSMessage) (string, error) {
		if m.Body == "" {
			return "", errors.New("empty body")
		}
		return "evt-" + m.Body, nil
	}))
	// Two messages carrying one event: it runs once. A record without a key fails alone.
	resp, recs := h.Run(context.Background(), batch(msg("x1", "", "7"), msg("x2", "", "7"), msg("x3", "", "")))
	if got := failed(resp); fmt.Sprint(got) != "[x3]" || recs[1].Kind != idem.Replayed || recs[2].Kind != idem.InvalidKey {
		t.Fatalf("failures %v, kinds %v %v", got, recs[1].Kind, recs[2].Kind)
	}
	_, recs = h.Run(context.Background(), batch(msg("x4", "", "7")))
	if runs, _ := c.snapshot(); recs[0].Kind != idem.Replayed || runs["x1"] != 1 || runs["x2"]+runs["x4"] != 0 {
		t.Fatalf("runs %v, later send %v", runs, recs[0].Kind)
	}
}

func testConcurrencyIsBounded(t *testing.T, s store) {
	var running, peak atomic.Int32
	fn := func(context.Context, events.SQSMessage) (int, error) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(10 * time.Millisecond)
		running.Add(-1)
		return 0, nil
	}
	h := mustNew(t, s.guard(t), fn, idemsqs.WithConcurrency(3))
	var ev events.SQSEvent
	for i := range 12 {
		ev.Records = append(ev.Records, msg("conc-"+strconv.Itoa(i), "", `{}`))
	}
	resp, _ := h.Run(context.Background(), ev)
	// Slow records start the other workers: the bound is reached, never passed.
	if len(resp.BatchItemFailures) != 0 || peak.Load() != 3 {
		t.Fatalf("failures %v, peak concurrency %d, want the bound 3", resp.BatchItemFailures, peak.Load())
	}
}

// roundTrips counts a single-node client's round trips: one per command, one per pipeline,
// leaving out the handshake of a new connection (HELLO, CLIENT SETINFO), which is not the batch's.
type roundTrips struct{ n atomic.Int64 }

func handshake(name string) bool { return name == "hello" || name == "client" || name == "auth" }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd.Name()) {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds[0].Name()) {
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

func testRoundTrips(t *testing.T, s store) {
	client := s.newClient(t)
	trips := &roundTrips{}
	_, single := client.(*redis.Client)
	if single {
		client.AddHook(trips)
	}
	g, err := idem.New(client, idem.WithPrefix(s.prefix))
	if err != nil {
		t.Fatal(err)
	}
	h := mustNew(t, g, newCounter().process)
	var ev events.SQSEvent
	for i := range 10 {
		ev.Records = append(ev.Records, msg("trip-"+strconv.Itoa(i), "", `{}`))
	}
	_, recs := h.Run(context.Background(), ev)
	for _, r := range recs {
		if r.Kind != idem.Executed || r.RoundTrips != 2 {
			t.Fatalf("new record %s: %v, %d round trips; want executed in 2", r.MessageID, r.Kind, r.RoundTrips)
		}
	}
	if single && trips.n.Load() != 2 {
		t.Fatalf("the client made %d round trips for a batch of 10 new records, want 2", trips.n.Load())
	}
	before := trips.n.Load()
	_, recs = h.Run(context.Background(), ev)
	for _, r := range recs {
		if r.Kind != idem.Replayed || r.RoundTrips != 1 {
			t.Fatalf("replayed record %s: %v, %d round trips; want replayed in 1", r.MessageID, r.Kind, r.RoundTrips)
		}
	}
	if single && trips.n.Load()-before != 1 {
		t.Fatalf("the client made %d round trips for a batch of 10 replays, want 1", trips.n.Load()-before)
	}
}

// A record's Err matches the core's sentinel of its Kind, whichever step refused it.
func TestRecordErrorsMatchTheCoreSentinels(t *testing.T) {
	g, err := idem.New(testsupport.StartMiniredis(t).NewClient())
	if err != nil {
		t.Fatal(err)
	}
	hold, started := make(chan struct{}), make(chan struct{})
	h := mustNew(t, g, func(_ context.Context, msg events.SQSMessage) (string, error) {
		if msg.Body == "held" {
			close(started)
			<-hold
		}
		return "ok", nil
	}, idemsqs.WithKey(func(msg events.SQSMessage) (string, error) {
		if msg.Body == "no key" {
			return "", errors.New("no id in the body")
		}
		return msg.Attributes["key"], nil
	}))
	ctx := context.Background()
	msg := func(id, key, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: body, Attributes: map[string]string{"key": key}}
	}
	h.Run(ctx, events.SQSEvent{Records: []events.SQSMessage{msg("m0", "done", "first")}})
	go h.Run(ctx, events.SQSEvent{Records: []events.SQSMessage{msg("m1", "held", "held")}})
	<-started
	defer close(hold)
	_, recs := h.Run(ctx, events.SQSEvent{Records: []events.SQSMessage{
		msg("m2", "held", "held"), msg("m3", "done", "other body"), msg("m4", "", "no key"), msg("m5", "", "empty key"),
	}})
	for i, want := range []struct {
		kind idem.Kind
		err  error
	}{{idem.InProgress, idem.ErrInProgress}, {idem.Mismatch, idem.ErrMismatch}, {idem.InvalidKey, idem.ErrInvalidKey}, {idem.InvalidKey, idem.ErrInvalidKey}} {
		if r := recs[i]; r.Kind != want.kind || !errors.Is(r.Err, want.err) || !r.Retry {
			t.Errorf("record %s: %s, %v, retry %v; want %s matching %v, retried", r.MessageID, r.Kind, r.Err, r.Retry, want.kind, want.err)
		}
	}
}
