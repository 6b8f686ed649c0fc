package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/redis/go-redis/v9"
)

// finishCase is one key's state before a batch is finished, and what the batch asks of it.
type finishCase struct {
	name    string
	state   func(ours, theirs token, fp Fingerprint) []byte // nil: no record (expired)
	release bool
}

var finishCases = func() []finishCase {
	claim := func(tok token, fp Fingerprint) []byte {
		return encodeInProgress(tok, fp, time.Now().Add(time.Minute))
	}
	done := func(tok token, fp Fingerprint) []byte {
		b, err := encodeCompleted(tok, fp, time.Now().Add(time.Hour), Result{Status: 200, Body: []byte("first")}, maxResultSize)
		if err != nil {
			panic(err)
		}
		return b
	}
	var cases []finishCase
	for _, release := range []bool{false, true} {
		job := "complete"
		if release {
			job = "release"
		}
		cases = append(cases,
			finishCase{job + " our claim", func(o, _ token, fp Fingerprint) []byte { return claim(o, fp) }, release},
			finishCase{job + " expired claim", func(token, token, Fingerprint) []byte { return nil }, release},
			finishCase{job + " taken over by another owner", func(_, t token, fp Fingerprint) []byte { return claim(t, fp) }, release},
			finishCase{job + " completed by another owner", func(_, t token, fp Fingerprint) []byte { return done(t, fp) }, release},
			finishCase{job + " already completed by us", func(o, _ token, fp Fingerprint) []byte { return done(o, fp) }, release},
		)
	}
	return cases
}()

// testFinishScriptRepliesPerKey finishes keys in every state with one call of the finish script
// and checks each reply and each key's value and TTL against what complete.lua and release.lua do
// with a copy of the same key on its own.
func testFinishScriptRepliesPerKey(t *testing.T, c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	f := finishFixture{c: c, prefix: prefix}
	const ttl = 90 * time.Minute
	keys, args, want := f.finishAlone(t, ttl)
	got, err := finishScript.Run(ctx, c, keys, args...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(finishCases) {
		t.Fatalf("%d replies for %d keys", len(got), len(finishCases))
	}
	// The replies the guard tells apart, per case, in the order of finishCases.
	wantKnown := []int64{scriptDone, scriptGone, scriptOtherOwner, scriptOtherOwner, scriptAlreadyOurs,
		scriptDone, scriptGone, scriptOtherOwner, scriptOtherOwner, scriptResultKept}
	for i, fc := range finishCases {
		if got[i] != want[i] || got[i] != wantKnown[i] {
			t.Errorf("%s: finish replied %d, the single-key script %d, want %d", fc.name, got[i], want[i], wantKnown[i])
		}
		f.compare(t, i, got[i], ttl)
	}
	if n, err := c.Exists(ctx, f.key("batch", 1), f.key("batch", 6)).Result(); err != nil || n != 0 {
		t.Errorf("finishing expired claims created %d keys (%v)", n, err)
	}
}

// finishFixture holds each of finishCases in two keys: one of set "batch", for one call of the
// finish script, and one of set "single", for complete.lua or release.lua on its own.
type finishFixture struct {
	c      redis.UniversalClient
	prefix string
}

// key is case i's key of set. One hash tag: a multi-key script needs its keys in one slot on a
// cluster.
func (f finishFixture) key(set string, i int) string {
	return fmt.Sprintf("%s:{finish}:%s:%d", f.prefix, set, i)
}

// set makes v the value of k, or deletes k when v is nil.
func (f finishFixture) set(t *testing.T, k string, v []byte) {
	t.Helper()
	ctx := context.Background()
	if err := f.c.Del(ctx, k).Err(); err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := f.c.Set(ctx, k, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// finishAlone puts every case's state in both its keys and finishes its "single" key with the
// single-key script. It returns the keys and arguments of the call of the finish script that
// asks the same of the "batch" keys, and the single-key script's reply per case.
func (f finishFixture) finishAlone(t *testing.T, ttl time.Duration) (keys []string, args []any, want []int64) {
	t.Helper()
	ctx := context.Background()
	theirs := token{9, 8, 7}
	fp := FingerprintOf([]byte("payload"))
	var owners []byte
	args = []any{ttl.Milliseconds(), nil}
	want = make([]int64, len(finishCases))
	for i, fc := range finishCases {
		// Each key its own owner, so that a call reading another key's owner prefix fails.
		ours := token{1, 2, 3, byte(i + 1)}
		ownerPrefix := encodeInProgress(ours, fp, time.Now())[:ownerPrefixSize]
		result, err := encodeCompleted(ours, fp, time.Now().Add(time.Hour), Result{Status: 201, Body: []byte("second")}, maxResultSize)
		if err != nil {
			t.Fatal(err)
		}
		v := fc.state(ours, theirs, fp)
		f.set(t, f.key("batch", i), v)
		f.set(t, f.key("single", i), v)
		keys = append(keys, f.key("batch", i))
		single := []string{f.key("single", i)}
		if fc.release {
			args = append(args, "")
			want[i], err = releaseScript.Run(ctx, f.c, single, ownerPrefix).Int64()
		} else {
			args = append(args, result)
			want[i], err = completeScript.Run(ctx, f.c, single, ownerPrefix, result, ttl.Milliseconds()).Int64()
		}
		if err != nil {
			t.Fatalf("%s alone: %v", fc.name, err)
		}
		owners = append(owners, ownerPrefix...)
	}
	args[1] = owners
	return keys, args, want
}

// compare checks that the finish script, which replied n, left case i's "batch" key as the
// single-key script left its "single" key: the same value and TTL, a stored result expiring
// after ttl.
func (f finishFixture) compare(t *testing.T, i int, n int64, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	fc := finishCases[i]
	b, bErr := f.c.Get(ctx, f.key("batch", i)).Result()
	s, sErr := f.c.Get(ctx, f.key("single", i)).Result()
	if b != s || (bErr == nil) != (sErr == nil) {
		t.Errorf("%s: finish left %q (%v), the single-key script %q (%v)", fc.name, b, bErr, s, sErr)
	}
	bTTL, _ := f.c.PTTL(ctx, f.key("batch", i)).Result()
	sTTL, _ := f.c.PTTL(ctx, f.key("single", i)).Result()
	if d := bTTL - sTTL; d > time.Second || d < -time.Second {
		t.Errorf("%s: finish left a TTL of %s, the single-key script %s", fc.name, bTTL, sTTL)
	}
	if !fc.release && n == scriptDone && (bTTL < ttl-time.Minute || bTTL > ttl) {
		t.Errorf("%s: a stored result expires in %s, want the result TTL %s", fc.name, bTTL, ttl)
	}
}

func TestFinishScriptOnRealRedis(t *testing.T) {
	testsupport.SharedRedis(t)
	c := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr()})
	t.Cleanup(func() { c.Close() })
	testFinishScriptRepliesPerKey(t, c, testsupport.UniquePrefix(t)+"idem")
}

func TestFinishScriptOnRedisCluster(t *testing.T) {
	cl := testsupport.StartCluster(t, 3, 0)
	c := cl.NewClient()
	t.Cleanup(func() { c.Close() })
	testFinishScriptRepliesPerKey(t, c, "idem")
}

func TestFinishScriptOnMiniredis(t *testing.T) {
	c := testsupport.StartMiniredis(t).NewClient()
	testFinishScriptRepliesPerKey(t, c, "idem")
}

// testBatchFinishPerKeyStates runs a batch whose claims change hands while the works run: some
// expire, some are taken over by another owner, some already hold our result (a completion
// retried after its reply was lost), and some works fail. Every item gets the outcome Do would
// give it, and the keys of other owners are left alone.
func testBatchFinishPerKeyStates(t *testing.T, b backend) {
	c := b.newClient(t)
	g := b.guard(t, c)
	ctx := context.Background()
	fp := FingerprintOf([]byte("payload"))
	h := handOver{t: t, c: c, fp: fp, theirs: encodeInProgress(token{9, 9, 9}, fp, time.Now().Add(time.Minute))}
	steps := []struct {
		name  string
		fail  bool
		after func(rk string) // changes the key after the work ran
		want  Kind
		value func(v string, err error) string // "" when the value is right
	}{
		{"stored", false, nil, Executed, wantResult("ok stored")},
		{"expired", false, h.expire, LockLost, wantGone},
		{"taken over", false, h.takeOver, LockLost, h.wantTheirs},
		{"already ours", false, h.completeFirst, Executed, wantResult("earlier")},
		{"released", true, nil, Failed, wantGone},
		{"failed, expired", true, h.expire, Failed, wantGone},
		{"failed, taken over", true, h.takeOver, Failed, h.wantTheirs},
		{"failed, already ours", true, h.completeFirst, Failed, wantResult("earlier")},
		{"stored too", false, nil, Executed, wantResult("ok stored too")},
	}
	items := make([]Item, len(steps))
	for i, s := range steps {
		work := okWork("ok " + s.name)
		if s.fail {
			work = func(context.Context) (Result, error) { return Result{}, errors.New("boom") }
		}
		items[i] = Item{Key: Key{Scope: "states", ID: strings.ReplaceAll(s.name, " ", "-")}, Fingerprint: fp, Work: work}
	}
	outs, errs := g.DoBatch(ctx, items, func(claimed []int, work func(int) error) {
		for _, i := range claimed {
			_ = work(i)
			if steps[i].after != nil {
				steps[i].after(items[i].Key.redisKey(b.prefix))
			}
		}
	})
	for i, s := range steps {
		if outs[i].Kind != s.want {
			t.Errorf("%s: %v (%v), want %v", s.name, outs[i].Kind, errs[i], s.want)
		}
		if (errs[i] == nil) != (s.want == Executed) {
			t.Errorf("%s: error %v", s.name, errs[i])
		}
		if msg := s.value(c.Get(ctx, items[i].Key.redisKey(b.prefix)).Result()); msg != "" {
			t.Errorf("%s: %s", s.name, msg)
		}
	}
	if !strings.Contains(fmt.Sprint(errs[6]), "another owner") {
		t.Errorf("a failed item taken over says %v, want that another owner holds the key", errs[6])
	}
}

// handOver changes a claimed key while its work runs, as time and other owners would.
type handOver struct {
	t      *testing.T
	c      redis.UniversalClient
	fp     Fingerprint
	theirs []byte // another owner's claim
}

// expire deletes the key, as its claim's expiry would.
func (h handOver) expire(rk string) {
	if err := h.c.Del(context.Background(), rk).Err(); err != nil {
		h.t.Fatal(err)
	}
}

// takeOver gives the key to another owner.
func (h handOver) takeOver(rk string) {
	if err := h.c.Set(context.Background(), rk, h.theirs, time.Minute).Err(); err != nil {
		h.t.Fatal(err)
	}
}

// completeFirst stores our result as an earlier completion would have, with our token.
func (h handOver) completeFirst(rk string) {
	ctx := context.Background()
	v, err := h.c.Get(ctx, rk).Bytes()
	if err != nil {
		h.t.Fatal(err)
	}
	rec, err := decodeRecord(v)
	if err != nil {
		h.t.Fatal(err)
	}
	done, err := encodeCompleted(rec.token, h.fp, time.Now().Add(time.Hour), Result{Status: 200, Body: []byte("earlier")}, maxResultSize)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.Set(ctx, rk, done, time.Hour).Err(); err != nil {
		h.t.Fatal(err)
	}
}

// wantTheirs says what is wrong with a key's value v (read with err) that should be the other
// owner's claim; "" when nothing is.
func (h handOver) wantTheirs(v string, err error) string {
	if err != nil || v != string(h.theirs) {
		return fmt.Sprintf("want the other owner's claim, got %q (%v)", v, err)
	}
	return ""
}

// wantGone says what is wrong with a key that should not exist; "" when nothing is.
func wantGone(v string, err error) string {
	if !errors.Is(err, redis.Nil) {
		return fmt.Sprintf("want no key, got %q (%v)", v, err)
	}
	return ""
}

// wantResult is a check of a key that should hold our completed result with body.
func wantResult(body string) func(string, error) string {
	return func(v string, err error) string {
		rec, derr := decodeRecord([]byte(v))
		if err != nil || derr != nil || !rec.completed || string(rec.result.Body) != body {
			return fmt.Sprintf("want our result %q, got %q (%v, %v)", body, v, err, derr)
		}
		return ""
	}
}

func TestBatchFinishPerKeyStatesOnMiniredis(t *testing.T) {
	testBatchFinishPerKeyStates(t, miniredisBackend(t))
}
func TestBatchFinishPerKeyStatesOnRealRedis(t *testing.T) {
	testBatchFinishPerKeyStates(t, sharedRedisBackend(t))
}
func TestBatchFinishPerKeyStatesOnRedisCluster(t *testing.T) {
	testBatchFinishPerKeyStates(t, clusterBackend(t))
}

// TestBatchOfTenCommandsOnOneNode counts what a batch of 10 new keys costs a single node: 2 round
// trips (the claims' pipeline, one finish script), 11 commands sent, and on the server 10 claims,
// 1 script and the script's one MGET and 10 SET.
func TestBatchOfTenCommandsOnOneNode(t *testing.T) {
	srv := testsupport.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	sent := &testsupport.CommandCounter{}
	c.AddHook(sent)
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fp := FingerprintOf([]byte("payload"))
	batch := func(scope string) []Item {
		items := make([]Item, 10)
		for i := range items {
			items[i] = Item{Key: Key{Scope: scope, ID: fmt.Sprint("evt-", i)}, Fingerprint: fp, Work: okWork(fmt.Sprint(i))}
		}
		return items
	}
	g.DoBatch(ctx, batch("warm"), nil) // the server compiles the script
	before := testsupport.CommandStats(t, c)
	sent.Commands.Store(0)
	sent.RoundTrips.Store(0)
	outs, errs := g.DoBatch(ctx, batch("counted"), nil)
	after := testsupport.CommandStats(t, c)
	for i, o := range outs {
		if o.Kind != Executed || o.RoundTrips != 2 {
			t.Fatalf("item %d: %v (%v) in %d round trips", i, o.Kind, errs[i], o.RoundTrips)
		}
	}
	// The second INFO is counted by the hook too: 1 round trip, 1 command.
	if trips, n := sent.RoundTrips.Load()-1, sent.Commands.Load()-1; trips != 2 || n != 11 {
		t.Errorf("a batch of 10 new keys took %d round trips and %d commands, want 2 and 11", trips, n)
	}
	want := map[string]int64{"set": 20, "mget": 1, "evalsha": 1, "info": 1}
	for name := range after {
		if d := after[name] - before[name]; d != want[name] {
			t.Errorf("server ran %s %d times, want %d", name, d, want[name])
		}
	}
	for name, n := range want {
		if after[name]-before[name] != n {
			t.Errorf("server ran %s %d times, want %d", name, after[name]-before[name], n)
		}
	}
}
