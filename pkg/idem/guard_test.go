package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/redis/go-redis/v9"
)

// commandLog records the name of every command a client sends.
type commandLog struct {
	mu    sync.Mutex
	names []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.mu.Lock()
		l.names = append(l.names, cmd.Name())
		l.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// take returns the commands sent since the last call.
func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := l.names
	l.names = nil
	return names
}

func TestRoundTripBudget(t *testing.T) {
	for _, srv := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"redis 7", func(t *testing.T) string { testsupport.SharedRedis(t); return testsupport.SharedRedisAddr() }},
		{"miniredis", func(t *testing.T) string { return testsupport.StartMiniredis(t).Addr() }},
	} {
		t.Run(srv.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: srv.addr(t)})
			t.Cleanup(func() { c.Close() })
			log := &commandLog{}
			c.AddHook(log)
			g, err := New(c, WithPrefix(testsupport.UniquePrefix(t)+"idem"))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			fp := FingerprintOf([]byte("body"))
			warmUp(g, fp)
			holdClaim(t, g, Key{Scope: "budget", ID: "held"}, fp)
			log.take()

			for _, tc := range []struct {
				name string
				key  string
				work Work
				kind Kind
				want []string
			}{
				{"first execution", "new", okWork("x"), Executed, []string{"set", "evalsha"}},
				{"replay", "new", okWork("x"), Replayed, []string{"set"}},
				{"in-progress duplicate", "held", okWork("x"), InProgress, []string{"set"}},
				{"failure release", "failing", failWork, Failed, []string{"set", "evalsha"}},
			} {
				out, _ := g.Do(ctx, Key{Scope: "budget", ID: tc.key}, fp, tc.work)
				got := log.take()
				if out.Kind != tc.kind || strings.Join(got, " ") != strings.Join(tc.want, " ") || out.RoundTrips != len(tc.want) {
					t.Errorf("%s: %v sent %v (RoundTrips %d), want %v %v", tc.name, out.Kind, got, out.RoundTrips, tc.kind, tc.want)
				}
			}
		})
	}
}

// The commands a server counts per request (INFO commandstats, which also counts the commands a
// script calls), on private servers so that nothing else is counted.
func TestServerCountedCommandsPerRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t testing.TB, args ...string) *testsupport.RedisServer
		first map[string]int64
	}{
		{"redis 7", testsupport.StartRedis, map[string]int64{"set": 2, "evalsha": 1, "get": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.start(t).NewClient()
			g, _ := New(c)
			ctx := context.Background()
			fp := FingerprintOf([]byte("body"))
			warmUp(g, fp)
			holdClaim(t, g, Key{Scope: "count", ID: "held"}, fp)
			for _, step := range []struct {
				name string
				key  string
				work Work
				want map[string]int64
			}{
				{"first execution", "new", okWork("x"), tc.first},
				{"replay", "new", okWork("x"), map[string]int64{"set": 1}},
				{"in-progress duplicate", "held", okWork("x"), map[string]int64{"set": 1}},
				{"failure release", "failing", failWork, map[string]int64{"set": 1, "evalsha": 1, "get": 1, "del": 1}},
			} {
				before := testsupport.CommandStats(t, c)
				g.Do(ctx, Key{Scope: "count", ID: step.key}, fp, step.work)
				got := testsupport.CommandStats(t, c)
				for name, n := range before {
					got[name] -= n
					if got[name] == 0 {
						delete(got, name)
					}
				}
				delete(got, "info")
				if fmt.Sprint(got) != fmt.Sprint(step.want) {
					t.Errorf("%s: the server counted %v, want %v", step.name, got, step.want)
				}
			}
		})
	}
}

// A guard sends a script's source on its first call (one round trip, like EVALSHA, and no NOSCRIPT
// on a server that never saw it), then its SHA, and the source again only after NOSCRIPT.
func TestScriptSourceIsSentOnFirstUseAndAfterNoScript(t *testing.T) {
	for i, tc := range []struct {
		name string
		addr string
		// Round trips of a new guard's first call on a server that never saw the scripts: the
		// claim, then EVAL with the source.
		first int
		// Round trips of the first call after SCRIPT FLUSH: the claim, EVALSHA, NOSCRIPT, EVAL.
		flushed int
		// What the second call sends.
		second string
	}{
		{"redis-server 7", testsupport.StartRedis(t).Addr(), 2, 3, "set evalsha"},
		{"miniredis", testsupport.StartMiniredis(t).Addr(), 2, 3, "set evalsha"},
	} {
		scope := fmt.Sprintf("s%d", i)
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: tc.addr})
			defer c.Close()
			c.ScriptFlush(context.Background())
			log := &commandLog{}
			c.AddHook(log)
			g, _ := New(c)
			ctx := context.Background()
			out, err := g.Do(ctx, Key{Scope: scope, ID: "1"}, Fingerprint{}, okWork("x"))
			if err != nil || out.Kind != Executed || out.RoundTrips != tc.first {
				t.Fatalf("unknown script: %v %v, %d round trips; want %d (sent %v)", out.Kind, err, out.RoundTrips, tc.first, log.take())
			}
			log.take()
			out, _ = g.Do(ctx, Key{Scope: scope, ID: "2"}, Fingerprint{}, okWork("x"))
			if sent := strings.Join(log.take(), " "); out.RoundTrips != 2 || sent != tc.second {
				t.Fatalf("known script: %d round trips, sent %q; want 2, %q", out.RoundTrips, sent, tc.second)
			}
			c.ScriptFlush(ctx)
			if out, _ = g.Do(ctx, Key{Scope: scope, ID: "3"}, Fingerprint{}, okWork("x")); out.Kind != Executed || out.RoundTrips != tc.flushed {
				t.Fatalf("after SCRIPT FLUSH: %v, %d round trips, want %d", out.Kind, out.RoundTrips, tc.flushed)
			}
		})
	}
}

// Under noeviction a full Redis refuses new claims but still takes the result of work that ran:
// the completion script is flagged allow-oom.
func TestFullRedisRefusesClaimsButStoresResultsOfWorkThatRan(t *testing.T) {
	srv := testsupport.StartRedis(t, "--maxmemory-policy", "noeviction")
	c := srv.NewClient()
	defer c.Close()
	g, _ := New(c)
	ctx := context.Background()
	out, err := g.Do(ctx, Key{Scope: "oom", ID: "claimed-before"}, Fingerprint{}, func(context.Context) (Result, error) {
		// The memory fills up while the work runs (here: the limit drops below what is used).
		if err := c.ConfigSet(ctx, "maxmemory", "100kb").Err(); err != nil {
			return Result{}, err
		}
		if err := c.Set(ctx, "other-writer", "x", 0).Err(); err == nil {
			return Result{}, errors.New("redis is not full: the test would prove nothing")
		}
		return Result{Status: 200, Body: []byte("done")}, nil
	})
	if err != nil || out.Kind != Executed {
		t.Fatalf("completion on a full Redis: %v, %v; want Executed and stored", out.Kind, err)
	}
	if out, _ := g.Do(ctx, Key{Scope: "oom", ID: "claimed-before"}, Fingerprint{}, okWork("again")); out.Kind != Replayed {
		t.Fatalf("retry: %v, want Replayed", out.Kind)
	}
	ran := false
	out, err = g.Do(ctx, Key{Scope: "oom", ID: "new"}, Fingerprint{}, func(context.Context) (Result, error) { ran = true; return Result{}, nil })
	if out.Kind != Unavailable || err == nil || ran {
		t.Fatalf("new claim on a full Redis: %v, %v, ran=%v; want Unavailable and nothing run", out.Kind, err, ran)
	}
}

// dropFirstReply forwards to target, but swallows the reply to the first command whose bytes
// contain marker: the server applied it, the client sees its connection die and retries the
// same command.
func dropFirstReply(t *testing.T, target string, marker []byte) (addr string, dropped *atomic.Bool) {
	dropped = &atomic.Bool{}
	addr = testsupport.Serve(t, func(client net.Conn) {
		server, err := net.Dial("tcp", target)
		if err != nil {
			client.Close()
			return
		}
		var dropNext atomic.Bool
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					if bytes.Contains(buf[:n], marker) && dropped.CompareAndSwap(false, true) {
						dropNext.Store(true)
					}
					server.Write(buf[:n])
				}
				if err != nil {
					server.Close()
					return
				}
			}
		}()
		buf := make([]byte, 64<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && dropNext.Load() {
				client.Close()
				server.Close()
				return
			}
			if n > 0 {
				client.Write(buf[:n])
			}
			if err != nil {
				client.Close()
				return
			}
		}
	})
	return addr, dropped
}

func TestClaimRetriedAfterLostReplyRecognisesItsOwnToken(t *testing.T) {
	testsupport.SharedRedis(t)
	addr, dropped := dropFirstReply(t, testsupport.SharedRedisAddr(), []byte("$3\r\nset\r\n"))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 2, Protocol: 2, DisableIdentity: true})
	defer c.Close()
	g, _ := New(c, WithPrefix(testsupport.UniquePrefix(t)+"idem"))
	runs := 0
	out, err := g.Do(context.Background(), Key{Scope: "stripe", ID: "evt_lost_reply"}, Fingerprint{}, func(context.Context) (Result, error) {
		runs++
		return Result{Status: 200}, nil
	})
	if !dropped.Load() {
		t.Fatal("the proxy never dropped a claim reply: the test did not exercise the retry")
	}
	if err != nil || out.Kind != Executed || runs != 1 {
		t.Fatalf("retried claim: %v, %v, runs=%d; want Executed once (not InProgress)", out.Kind, err, runs)
	}
}

func TestCompletionRetriedAfterLostReplyRecognisesItsOwnResult(t *testing.T) {
	srv := testsupport.StartRedis(t)
	// A new guard's first completion is an EVAL with the script's source.
	addr, dropped := dropFirstReply(t, srv.Addr(), []byte("$4\r\neval\r\n"))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 2, Protocol: 2, DisableIdentity: true})
	defer c.Close()
	g, _ := New(c)
	runs := 0
	out, err := g.Do(context.Background(), Key{Scope: "stripe", ID: "evt_lost_store_reply"}, Fingerprint{}, func(context.Context) (Result, error) {
		runs++
		return Result{Status: 200, Body: []byte("stored")}, nil
	})
	if !dropped.Load() {
		t.Fatal("the proxy never dropped a completion reply: the test did not exercise the retry")
	}
	if err != nil || out.Kind != Executed || runs != 1 {
		t.Fatalf("retried completion: %v, %v, runs=%d; want Executed once (not LockLost)", out.Kind, err, runs)
	}
	out, err = g.Do(context.Background(), Key{Scope: "stripe", ID: "evt_lost_store_reply"}, Fingerprint{}, okWork("again"))
	if err != nil || out.Kind != Replayed || string(out.Result.Body) != "stored" || runs != 1 {
		t.Fatalf("retry: %v, %v, %q; want the stored result replayed", out.Kind, err, out.Result.Body)
	}
}

func TestRedisStoppedMidTestFailsClosedAndRecovers(t *testing.T) {
	srv := testsupport.StartRedis(t)
	// The client a function builds, with its Lambda timeouts.
	conn, err := redisconn.Open(context.Background(), redisconn.Settings{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	g, _ := New(conn.Client)
	ctx := context.Background()
	fp := FingerprintOf([]byte("x"))
	if out, err := g.Do(ctx, Key{Scope: "down", ID: "before"}, fp, okWork("x")); out.Kind != Executed {
		t.Fatalf("before: %v %v", out.Kind, err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ran := false
	start := time.Now()
	out, err := g.Do(ctx, Key{Scope: "down", ID: "during"}, fp, func(context.Context) (Result, error) { ran = true; return Result{}, nil })
	elapsed := time.Since(start)
	if out.Kind != Unavailable || err == nil {
		t.Fatalf("while down: %v, %v; want Unavailable", out.Kind, err)
	}
	if ran {
		t.Fatal("work ran without a claim while the store was down")
	}
	// Bounded by the dial timeout and one retry, far below a Lambda timeout; generous for a busy machine.
	if elapsed > 2*(redisconn.DefaultDialTimeout+redisconn.DefaultReadTimeout)+time.Second {
		t.Fatalf("store unavailable took %s to report", elapsed)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	out, err = g.Do(ctx, Key{Scope: "down", ID: "during"}, fp, okWork("after"))
	if err != nil || out.Kind != Executed {
		t.Fatalf("after recovery: %v, %v", out.Kind, err)
	}
}

func TestRedisLostDuringWorkReportsResultNotStored(t *testing.T) {
	srv := testsupport.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, MaxRetries: 1})
	defer c.Close()
	g, _ := New(c)
	out, err := g.Do(context.Background(), Key{Scope: "down", ID: "mid-work"}, Fingerprint{}, func(context.Context) (Result, error) {
		srv.Stop()
		return Result{Status: 200, Body: []byte("done")}, nil
	})
	if out.Kind != NotStored || err == nil || string(out.Result.Body) != "done" {
		t.Fatalf("got %v, %v; want NotStored with the result", out.Kind, err)
	}
}

func TestFailOpenRunsWorkUnguardedOnlyWhenAskedTo(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testsupport.ClosedAddr(t), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	closed, _ := New(c)
	open, _ := New(c, WithFailOpen(true))
	ran := 0
	work := func(context.Context) (Result, error) { ran++; return Result{Status: 200}, nil }
	if out, _ := closed.Do(context.Background(), Key{Scope: "s", ID: "1"}, Fingerprint{}, work); out.Kind != Unavailable || ran != 0 {
		t.Fatalf("fail closed: %v ran=%d", out.Kind, ran)
	}
	if out, err := open.Do(context.Background(), Key{Scope: "s", ID: "1"}, Fingerprint{}, work); out.Kind != ExecutedUnguarded || err != nil || ran != 1 {
		t.Fatalf("fail open: %v %v ran=%d", out.Kind, err, ran)
	}
}

// localCacheGuards returns a guard with a local cache of 16 results for a minute, on a clock that
// moves only when advance is called, and another guard on the same store without a cache.
func localCacheGuards(t *testing.T) (g, other *Guard, advance func(time.Duration)) {
	t.Helper()
	c := testsupport.StartMiniredis(t).NewClient()
	now := time.Now()
	g, err := New(c, WithLocalCache(16, time.Minute), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	if other, err = New(c); err != nil {
		t.Fatal(err)
	}
	return g, other, func(d time.Duration) { now = now.Add(d) }
}

func TestLocalCacheReplaysCompletedResultsWithoutRoundTrip(t *testing.T) {
	g, _, advance := localCacheGuards(t)
	ctx := context.Background()
	fp := FingerprintOf([]byte("p"))
	key := Key{Scope: "s", ID: "cached"}
	g.Do(ctx, key, fp, okWork("first"))
	out, err := g.Do(ctx, key, fp, okWork("second"))
	if err != nil || out.Kind != Replayed || !out.FromLocalCache || out.RoundTrips != 0 || string(out.Result.Body) != "first" {
		t.Fatalf("warm replay: %+v %v", out, err)
	}
	if out, err := g.Do(ctx, key, FingerprintOf([]byte("q")), okWork("x")); out.Kind != Mismatch || err == nil || out.RoundTrips != 0 {
		t.Fatalf("mismatch from cache: %v %v", out.Kind, err)
	}
	// Past the cache TTL the store is asked again.
	advance(2 * time.Minute)
	if out, _ := g.Do(ctx, key, fp, okWork("x")); out.FromLocalCache || out.RoundTrips != 1 || out.Kind != Replayed {
		t.Fatalf("expired cache entry: %+v", out)
	}
}

func TestLocalCacheKeepsAReplayReadFromTheStore(t *testing.T) {
	g, other, _ := localCacheGuards(t)
	ctx := context.Background()
	fp := FingerprintOf([]byte("p"))
	key := Key{Scope: "s", ID: "elsewhere"}
	other.Do(ctx, key, fp, okWork("e"))
	if out, _ := g.Do(ctx, key, fp, okWork("x")); out.FromLocalCache || out.Kind != Replayed {
		t.Fatalf("first sight: %+v", out)
	}
	if out, _ := g.Do(ctx, key, fp, okWork("x")); !out.FromLocalCache {
		t.Fatalf("second sight not cached: %+v", out)
	}
}

func TestLocalCacheNeverKeepsInProgressRecords(t *testing.T) {
	g, other, _ := localCacheGuards(t)
	ctx := context.Background()
	fp := FingerprintOf([]byte("p"))
	key := Key{Scope: "s", ID: "busy"}
	holdClaim(t, other, key, fp)
	g.Do(ctx, key, fp, okWork("x"))
	if out, _ := g.Do(ctx, key, fp, okWork("x")); out.Kind != InProgress || out.RoundTrips != 1 {
		t.Fatalf("in progress: %+v", out)
	}
}

func TestClaimTTLAndWorkDeadlineFollowTheInvocationDeadline(t *testing.T) {
	mr := testsupport.StartMiniredis(t)
	c := mr.NewClient()
	g, _ := New(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	invocation, _ := ctx.Deadline()
	key := Key{Scope: "s", ID: "deadline"}
	g.Do(ctx, key, Fingerprint{}, func(wctx context.Context) (Result, error) {
		work, ok := wctx.Deadline()
		if !ok || work.After(invocation.Add(-500*time.Millisecond)) || work.Before(invocation.Add(-600*time.Millisecond)) {
			t.Errorf("work deadline %s before the invocation's, want 500ms", invocation.Sub(work))
		}
		ttl := mr.TTL(key.redisKey(defaultPrefix))
		if ttl < 11*time.Second || ttl > 12*time.Second {
			t.Errorf("claim TTL %s, want the remaining 10s plus the 2s margin", ttl)
		}
		return Result{}, nil
	})

	// A fixed lock TTL shorter than the invocation wins: the work ends before the claim can expire.
	g2, _ := New(c, WithLockTTL(3*time.Second))
	start := time.Now()
	g2.Do(ctx, Key{Scope: "s", ID: "fixed"}, Fingerprint{}, func(wctx context.Context) (Result, error) {
		work, _ := wctx.Deadline()
		if d := work.Sub(start); d > 2550*time.Millisecond || d < 2400*time.Millisecond {
			t.Errorf("work deadline %s after start, want lock TTL minus safety margin (2.5s)", d)
		}
		return Result{}, nil
	})

	// Without a deadline the default lock TTL applies.
	g.Do(context.Background(), Key{Scope: "s", ID: "nodeadline"}, Fingerprint{}, func(context.Context) (Result, error) {
		if ttl := mr.TTL(Key{Scope: "s", ID: "nodeadline"}.redisKey(defaultPrefix)); ttl != defaultLockTTL {
			t.Errorf("claim TTL without a deadline %s, want %s", ttl, defaultLockTTL)
		}
		return Result{}, nil
	})
}

func TestInvalidKeysNeverReachTheStore(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	log := &commandLog{}
	c.AddHook(log)
	g, _ := New(c)
	for _, k := range []Key{{"", "x"}, {"s", ""}, {"has space", "x"}, {"s{", "x"}, {"s", "line\nbreak"}, {"s", strings.Repeat("a", MaxIDLength+1)}, {strings.Repeat("s", maxScopeLength+1), "x"}} {
		out, err := g.Do(context.Background(), k, Fingerprint{}, okWork("x"))
		if out.Kind != InvalidKey || err == nil || k.Validate() == nil {
			t.Errorf("%q: %v %v", k, out.Kind, err)
		}
	}
	if sent := log.take(); len(sent) != 0 {
		t.Fatalf("invalid keys sent %v", sent)
	}
}

func TestCorruptRecordFailsClosed(t *testing.T) {
	mr := testsupport.StartMiniredis(t)
	c := mr.NewClient()
	g, _ := New(c)
	key := Key{Scope: "s", ID: "corrupt"}
	mr.Set(key.redisKey(defaultPrefix), "not a record")
	out, err := g.Do(context.Background(), key, Fingerprint{}, okWork("x"))
	if out.Kind != Unavailable || !errors.Is(err, errCorruptRecord) {
		t.Fatalf("%v %v", out.Kind, err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	tok := token{9, 8, 7}
	fp := FingerprintOf([]byte("x"))
	exp := time.UnixMilli(1_800_000_000_123)
	r := Result{Status: 201, Headers: map[string]string{"a": "1", "content-type": "application/json"}, Body: []byte(`{"id":"pay_1"}`)}
	b, err := encodeCompleted(tok, fp, exp, r, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodeRecord(b)
	if err != nil || !rec.completed || rec.token != tok || rec.fingerprint != fp || !rec.expiresAt.Equal(exp) ||
		rec.result.Status != 201 || rec.result.Headers["a"] != "1" || string(rec.result.Body) != string(r.Body) {
		t.Fatalf("%+v %v", rec, err)
	}
	rec, err = decodeRecord(encodeInProgress(tok, fp, exp))
	if err != nil || rec.completed || rec.token != tok || !rec.expiresAt.Equal(exp) {
		t.Fatalf("%+v %v", rec, err)
	}
	if _, err := encodeCompleted(tok, fp, exp, Result{Body: make([]byte, 100)}, 50); !errors.Is(err, errResultTooLarge) {
		t.Fatalf("size limit: %v", err)
	}
}

func TestFingerprintJSONIgnoresKeyOrderAndWhitespace(t *testing.T) {
	a, err1 := FingerprintJSON([]byte(`{"amount": 100, "currency":"EUR","meta":{"b":1,"a":2}}`))
	b, err2 := FingerprintJSON([]byte("{\"meta\":{\"a\":2,\"b\":1},\n \"currency\":\"EUR\",\"amount\":100}"))
	c, _ := FingerprintJSON([]byte(`{"amount":100.0,"currency":"EUR","meta":{"a":2,"b":1}}`))
	if err1 != nil || err2 != nil || a != b || a == c {
		t.Fatalf("canonical: %x %x %x %v %v", a, b, c, err1, err2)
	}
	x, _ := FingerprintJSON([]byte(`{"id":"e","ts":1}`), "id")
	y, _ := FingerprintJSON([]byte(`{"id":"e","ts":2}`), "id")
	if x != y {
		t.Fatal("unselected field changed the fingerprint")
	}
	for _, bad := range []string{``, `{`, `{} {}`, `[1]x`} {
		if _, err := FingerprintJSON([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestJoinIDIsUnambiguous(t *testing.T) {
	if JoinID("a b", "c") == JoinID("a", "b c") || JoinID("a:", "b") == JoinID("a", ":b") {
		t.Fatal("collision")
	}
}

func TestKindNames(t *testing.T) {
	for k := Executed; k <= Failed; k++ {
		if strings.HasPrefix(k.String(), "Kind(") {
			t.Errorf("%d has no name", k)
		}
	}
}
