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
	theirs := token{9, 8, 7}
	fp := FingerprintOf([]byte("payload"))
	const ttl = 90 * time.Minute
	// One hash tag: a multi-key script needs its keys in one slot on a cluster.
	key := func(set string, i int) string { return fmt.Sprintf("%s:{finish}:%s:%d", prefix, set, i) }
	set := func(k string, v []byte) {
		if err := c.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
		if v != nil {
			if err := c.Set(ctx, k, v, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var keys []string
	var owners []byte
	args := []any{ttl.Milliseconds(), nil}
	want := make([]int64, len(finishCases))
	for i, fc := range finishCases {
		// Each key its own owner, so that a call reading another key's owner prefix fails.
		ours := token{1, 2, 3, byte(i + 1)}
		ownerPrefix := encodeInProgress(ours, fp, time.Now())[:ownerPrefixSize]
		result, err := encodeCompleted(ours, fp, time.Now().Add(time.Hour), Result{Status: 201, Body: []byte("second")}, maxResultSize)
		if err != nil {
			t.Fatal(err)
		}
		v := fc.state(ours, theirs, fp)
		set(key("batch", i), v)
		set(key("single", i), v)
		keys = append(keys, key("batch", i))
		var n int64
		if fc.release {
			args = append(args, "")
			n, err = releaseScript.Run(ctx, c, []string{key("single", i)}, ownerPrefix).Int64()
		} else {
			args = append(args, result)
			n, err = completeScript.Run(ctx, c, []string{key("single", i)}, ownerPrefix, result, ttl.Milliseconds()).Int64()
		}
		if err != nil {
			t.Fatalf("%s alone: %v", fc.name, err)
		}
		want[i] = n
		owners = append(owners, ownerPrefix...)
	}
	args[1] = owners
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
		b, bErr := c.Get(ctx, key("batch", i)).Result()
		s, sErr := c.Get(ctx, key("single", i)).Result()
		if b != s || (bErr == nil) != (sErr == nil) {
			t.Errorf("%s: finish left %q (%v), the single-key script %q (%v)", fc.name, b, bErr, s, sErr)
		}
		bTTL, _ := c.PTTL(ctx, key("batch", i)).Result()
		sTTL, _ := c.PTTL(ctx, key("single", i)).Result()
		if d := bTTL - sTTL; d > time.Second || d < -time.Second {
			t.Errorf("%s: finish left a TTL of %s, the single-key script %s", fc.name, bTTL, sTTL)
		}
		if !fc.release && got[i] == scriptDone && (bTTL < ttl-time.Minute || bTTL > ttl) {
			t.Errorf("%s: a stored result expires in %s, want the result TTL %s", fc.name, bTTL, ttl)
		}
	}
	if n, err := c.Exists(ctx, key("batch", 1), key("batch", 6)).Result(); err != nil || n != 0 {
		t.Errorf("finishing expired claims created %d keys (%v)", n, err)
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
	theirs := encodeInProgress(token{9, 9, 9}, fp, time.Now().Add(time.Minute))
	type step struct {
		name  string
		fail  bool
		after func(rk string) // changes the key after the work ran
		want  Kind
		value func(rk string, v string, err error) string // "" when the value is right
	}
	gone := func(_ string, v string, err error) string {
		if !errors.Is(err, redis.Nil) {
			return fmt.Sprintf("want no key, got %q (%v)", v, err)
		}
		return ""
	}
	isTheirs := func(_ string, v string, err error) string {
		if err != nil || v != string(theirs) {
			return fmt.Sprintf("want the other owner's claim, got %q (%v)", v, err)
		}
		return ""
	}
	isResult := func(body string) func(string, string, error) string {
		return func(_ string, v string, err error) string {
			rec, derr := decodeRecord([]byte(v))
			if err != nil || derr != nil || !rec.completed || string(rec.result.Body) != body {
				return fmt.Sprintf("want our result %q, got %q (%v, %v)", body, v, err, derr)
			}
			return ""
		}
	}
	del := func(rk string) {
		if err := c.Del(ctx, rk).Err(); err != nil {
			t.Fatal(err)
		}
	}
	takeOver := func(rk string) {
		if err := c.Set(ctx, rk, theirs, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// completeFirst stores our result as an earlier completion would have, with our token.
	completeFirst := func(rk string) {
		v, err := c.Get(ctx, rk).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		rec, err := decodeRecord(v)
		if err != nil {
			t.Fatal(err)
		}
		done, err := encodeCompleted(rec.token, fp, time.Now().Add(time.Hour), Result{Status: 200, Body: []byte("earlier")}, maxResultSize)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Set(ctx, rk, done, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	steps := []step{
		{"stored", false, nil, Executed, isResult("ok stored")},
		{"expired", false, del, LockLost, gone},
		{"taken over", false, takeOver, LockLost, isTheirs},
		{"already ours", false, completeFirst, Executed, isResult("earlier")},
		{"released", true, nil, Failed, gone},
		{"failed, expired", true, del, Failed, gone},
		{"failed, taken over", true, takeOver, Failed, isTheirs},
		{"failed, already ours", true, completeFirst, Failed, isResult("earlier")},
		{"stored too", false, nil, Executed, isResult("ok stored too")},
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
		rk := items[i].Key.redisKey(b.prefix)
		v, err := c.Get(ctx, rk).Result()
		if msg := s.value(rk, v, err); msg != "" {
			t.Errorf("%s: %s", s.name, msg)
		}
	}
	if !strings.Contains(fmt.Sprint(errs[6]), "another owner") {
		t.Errorf("a failed item taken over says %v, want that another owner holds the key", errs[6])
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
