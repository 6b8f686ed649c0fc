package idem

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/redis/go-redis/v9"
)

// The benchmarks run against a private redis-server on loopback, beside the floor: a bare
// SET NX and a bare GET with the same client. Each reports cmds/op, the commands the client
// sent per operation, round-trips/op (the same, except that a pipeline is one round trip), and
// server-cmds/op, the commands the server executed (INFO commandstats; a script's own GET and
// SET count there). `make bench` prints the ratios of the medians.

type benchConn struct {
	*redis.Client
	sent *testsupport.CommandCounter
}

func benchClient(b *testing.B) benchConn { return benchClientAt(b, testsupport.StartRedis(b).Addr()) }

// benchClientAt connects to the redis-server at addr.
func benchClientAt(b *testing.B, addr string) benchConn {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4})
	b.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	sent := &testsupport.CommandCounter{}
	c.AddHook(sent)
	return benchConn{c, sent}
}

// serverCalls returns the number of commands the server has executed, apart from INFO itself.
func serverCalls(b *testing.B, c benchConn) int64 {
	var total int64
	for name, n := range testsupport.CommandStats(b, c.Client) {
		if name != "info" {
			total += n
		}
	}
	return total
}

// measure runs fn b.N times and reports the commands per operation, sent and executed.
func measure(b *testing.B, c benchConn, fn func(i int)) {
	before := serverCalls(b, c)
	sentBefore, tripsBefore := c.sent.Commands.Load(), c.sent.RoundTrips.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fn(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(c.sent.Commands.Load()-sentBefore)/float64(b.N), "cmds/op")
	b.ReportMetric(float64(c.sent.RoundTrips.Load()-tripsBefore)/float64(b.N), "round-trips/op")
	b.ReportMetric(float64(serverCalls(b, c)-before-1)/float64(b.N), "server-cmds/op")
}

var benchResult = Result{Status: 200, Headers: map[string]string{"content-type": "application/json"}, Body: []byte(`{"received":true,"id":"evt_1NmY2bKx7gT8sQ4r"}`)}

func benchWork(context.Context) (Result, error) { return benchResult, nil }

// newBenchGuard returns a guard as the functions build it.
func newBenchGuard(b *testing.B, c benchConn) *Guard {
	g, err := New(c.Client)
	if err != nil {
		b.Fatal(err)
	}
	// Load the scripts, as the first call of an environment does.
	g.Do(context.Background(), Key{Scope: "bench", ID: "warm"}, Fingerprint{}, benchWork)
	return g
}

// benchFP is the fingerprint of the Do benchmarks' payload.
var benchFP = FingerprintOf([]byte(`{"id":"evt"}`))

// doOp is Do on key(i), failing unless its outcome is want.
func doOp(b *testing.B, g *Guard, want Kind, key func(i int) Key) func(int) {
	ctx := context.Background()
	return func(i int) {
		if out, err := g.Do(ctx, key(i), benchFP, benchWork); out.Kind != want {
			b.Fatal(out.Kind, err)
		}
	}
}

// newKey is a new key per operation, as a first execution sees one.
func newKey(i int) Key { return Key{Scope: "bench", ID: "evt_" + strconv.Itoa(i)} }

func BenchmarkFirstExecution(b *testing.B) {
	c := benchClient(b)
	measure(b, c, doOp(b, newBenchGuard(b, c), Executed, newKey))
}

// replayOp is a replay of one key, completed beforehand.
func replayOp(b *testing.B, g *Guard) func(int) {
	key := Key{Scope: "bench", ID: "evt_replay"}
	g.Do(context.Background(), key, benchFP, benchWork)
	return doOp(b, g, Replayed, func(int) Key { return key })
}

func BenchmarkReplay(b *testing.B) {
	c := benchClient(b)
	measure(b, c, replayOp(b, newBenchGuard(b, c)))
}

// inProgressOp is a duplicate of a key another owner holds for the next hour.
func inProgressOp(b *testing.B, c benchConn, g *Guard) func(int) {
	key := Key{Scope: "bench", ID: "evt_busy"}
	held := encodeInProgress(token{1}, benchFP, time.Now().Add(time.Hour))
	if err := c.Set(context.Background(), key.redisKey(defaultPrefix), held, time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	return doOp(b, g, InProgress, func(int) Key { return key })
}

func BenchmarkInProgress(b *testing.B) {
	c := benchClient(b)
	measure(b, c, inProgressOp(b, c, newBenchGuard(b, c)))
}

func BenchmarkFloorSetNX(b *testing.B) { benchFloorSetNX(b, benchClient(b)) }

func benchFloorSetNX(b *testing.B, c benchConn) {
	ctx := context.Background()
	measure(b, c, func(i int) {
		if err := c.SetNX(ctx, "floor:"+strconv.Itoa(i), "v", time.Minute).Err(); err != nil {
			b.Fatal(err)
		}
	})
}

// floorGetOp is a bare GET of a value the size of the benchmarks' result body.
func floorGetOp(b *testing.B, c benchConn) func(int) {
	ctx := context.Background()
	c.Set(ctx, "floor:get", benchResult.Body, time.Hour)
	return func(int) {
		if err := c.Get(ctx, "floor:get").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFloorGet(b *testing.B) {
	c := benchClient(b)
	measure(b, c, floorGetOp(b, c))
}

// minimalCAS is the least a Lua completion can do: compare the owner, then write.
var minimalCAS = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end return 0`)

// floorClaimAndScriptOp is the hand-written minimum of a first execution: a bare SET NX PX and
// a minimal Lua compare-and-set, with the same client and no idempotency logic.
func floorClaimAndScriptOp(b *testing.B, c benchConn) func(int) {
	ctx := context.Background()
	minimalCAS.Load(ctx, c.Client)
	return func(i int) {
		key := "floor:cas:" + strconv.Itoa(i)
		if err := c.SetNX(ctx, key, "owner", time.Minute).Err(); err != nil {
			b.Fatal(err)
		}
		if err := minimalCAS.EvalSha(ctx, c.Client, []string{key}, "owner", benchResult.Body, 86400000).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorClaimAndScript is the floor of a first execution (floorClaimAndScriptOp).
func BenchmarkFloorClaimAndScript(b *testing.B) {
	c := benchClient(b)
	measure(b, c, floorClaimAndScriptOp(b, c))
}

// newFencedGuard is a guard with WithFencing, its scripts loaded.
func newFencedGuard(b *testing.B, c benchConn) *Guard {
	g, err := New(c.Client, WithFencing())
	if err != nil {
		b.Fatal(err)
	}
	g.Do(context.Background(), Key{Scope: "bench", ID: "warm"}, Fingerprint{}, benchWork)
	return g
}

// BenchmarkFencedFirstExecution is BenchmarkFirstExecution with WithFencing: the claim is one
// call of the fenced claim script instead of SET NX PX GET.
func BenchmarkFencedFirstExecution(b *testing.B) {
	c := benchClient(b)
	measure(b, c, doOp(b, newFencedGuard(b, c), Executed, newKey))
}

// minimalFencedClaim is the least a fenced claim can do in one call: read the record, draw a
// token from the clock and the counter, write both.
var minimalFencedClaim = redis.NewScript(`if redis.call('GET', KEYS[1]) then return 0 end
local t = redis.call('TIME')
local f = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, t[1] * 1000000 + t[2])
redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return f`)

// floorFencedClaimAndScriptOp is the hand-written minimum of a fenced first execution: one
// EVALSHA that claims and draws a token, and the minimal Lua compare-and-set.
func floorFencedClaimAndScriptOp(b *testing.B, c benchConn) func(int) {
	ctx := context.Background()
	minimalFencedClaim.Load(ctx, c.Client)
	minimalCAS.Load(ctx, c.Client)
	return func(i int) {
		key := "floor:fcas:{" + strconv.Itoa(i) + "}"
		if err := minimalFencedClaim.EvalSha(ctx, c.Client, []string{key, key + ":fence"}, "owner", 60000, 86400000).Err(); err != nil {
			b.Fatal(err)
		}
		if err := minimalCAS.EvalSha(ctx, c.Client, []string{key}, "owner", benchResult.Body, 86400000).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorFencedClaimAndScript is the floor of a fenced first execution
// (floorFencedClaimAndScriptOp).
func BenchmarkFloorFencedClaimAndScript(b *testing.B) {
	c := benchClient(b)
	measure(b, c, floorFencedClaimAndScriptOp(b, c))
}

// BenchmarkBatchFirstDelivery10 is a batch of 10 first deliveries, as an SQS batch handler sees
// one: 10 claims in one pipelined round trip, 10 results stored in one more. Compare it with
// BenchmarkFloorSetNX, a single bare SET NX.
func BenchmarkBatchFirstDelivery10(b *testing.B) { benchBatchFirstDelivery10(b, benchClient(b)) }

func benchBatchFirstDelivery10(b *testing.B, c benchConn) {
	measure(b, c, batchOp(b, newBenchGuard(b, c)))
}

// batchOp is a DoBatch of 10 new keys, failing unless every one is executed.
func batchOp(b *testing.B, g *Guard) func(int) {
	ctx := context.Background()
	items := make([]Item, 10)
	g.DoBatch(ctx, []Item{{Key: Key{Scope: "bench", ID: "batch-warm"}, Work: benchWork}}, nil)
	return func(i int) {
		for j := range items {
			items[j] = Item{Key: Key{Scope: "bench", ID: "batch_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)}, Fingerprint: benchFP, Work: benchWork}
		}
		outs, errs := g.DoBatch(ctx, items, nil)
		for j, out := range outs {
			if out.Kind != Executed {
				b.Fatal(out.Kind, errs[j])
			}
		}
	}
}

// floorBatchClaimAndScript10Op is the hand-written minimum of a batch of 10 first deliveries:
// 10 bare SET NX PX in one pipeline, then 10 minimal Lua compare-and-sets in another.
func floorBatchClaimAndScript10Op(b *testing.B, c benchConn) func(int) {
	ctx := context.Background()
	minimalCAS.Load(ctx, c.Client)
	keys := make([]string, 10)
	return func(i int) {
		for j := range keys {
			keys[j] = "floor:batch:" + strconv.Itoa(i) + ":" + strconv.Itoa(j)
		}
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.SetNX(ctx, k, "owner", time.Minute)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				minimalCAS.EvalSha(ctx, p, []string{k}, "owner", benchResult.Body, 86400000)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorBatchClaimAndScript10 is the floor of a batch of 10 first deliveries
// (floorBatchClaimAndScript10Op).
func BenchmarkFloorBatchClaimAndScript10(b *testing.B) {
	c := benchClient(b)
	measure(b, c, floorBatchClaimAndScript10Op(b, c))
}

// The paired benchmarks: each budgeted path and its floor on one server and client, in
// alternating blocks (testsupport.BenchPair); `make bench` holds the budgets against their
// path/floor ratios. The benchmarks above give each side's own time, allocations and commands.

// The pairs, each on the server behind c.

func firstExecutionPair(b *testing.B, c benchConn) testsupport.Pair {
	return testsupport.Pair{Path: doOp(b, newBenchGuard(b, c), Executed, newKey), Floor: floorClaimAndScriptOp(b, c)}
}

func replayPair(b *testing.B, c benchConn) testsupport.Pair {
	return testsupport.Pair{Path: replayOp(b, newBenchGuard(b, c)), Floor: floorGetOp(b, c)}
}

func batchFirstDelivery10Pair(b *testing.B, c benchConn) testsupport.Pair {
	return testsupport.Pair{Path: batchOp(b, newBenchGuard(b, c)), Floor: floorBatchClaimAndScript10Op(b, c)}
}

func BenchmarkPairFirstExecution(b *testing.B) {
	testsupport.BenchPair(b, firstExecutionPair(b, benchClient(b)))
}

func BenchmarkPairReplay(b *testing.B) { testsupport.BenchPair(b, replayPair(b, benchClient(b))) }

func BenchmarkPairInProgress(b *testing.B) {
	c := benchClient(b)
	testsupport.BenchPair(b, testsupport.Pair{Path: inProgressOp(b, c, newBenchGuard(b, c)), Floor: floorGetOp(b, c)})
}

func BenchmarkPairBatchFirstDelivery10(b *testing.B) {
	testsupport.BenchPair(b, batchFirstDelivery10Pair(b, benchClient(b)))
}

func BenchmarkPairFencedFirstExecution(b *testing.B) {
	c := benchClient(b)
	testsupport.BenchPair(b, testsupport.Pair{Path: doOp(b, newFencedGuard(b, c), Executed, newKey), Floor: floorFencedClaimAndScriptOp(b, c)})
}
