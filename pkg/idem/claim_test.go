package idem

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/redis/go-redis/v9"
)

// bulkReply is s as a RESP bulk string, as a server sends a GET's reply.
func bulkReply(s string) []byte {
	return []byte("$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n")
}

func TestParseBulkReply(t *testing.T) {
	for _, tc := range []struct {
		name, raw   string
		stored      string
		free, valid bool
	}{
		{"RESP2 null", "$-1\r\n", "", true, true},
		{"RESP3 null", "_\r\n", "", true, true},
		{"record", "$5\r\nab\r\nc\r\n", "ab\r\nc", false, true},
		{"empty string", "$0\r\n\r\n", "", false, true},
		{"error reply", "-READONLY You can't write against a read only replica.\r\n", "", false, false},
		{"blob error", "!9\r\nOOM hello\r\n", "", false, false},
		{"status", "+OK\r\n", "", false, false},
		{"integer", ":1\r\n", "", false, false},
		{"short body", "$5\r\nabc\r\n", "", false, false},
		{"long body", "$2\r\nabc\r\n", "", false, false},
		{"no length", "$\r\nabc\r\n", "", false, false},
		{"signed length", "$+3\r\nabc\r\n", "", false, false},
		{"length past the reply", "$99999999999999999999999\r\nabc\r\n", "", false, false},
		{"no final CRLF", "$3\r\nabcde", "", false, false},
		{"bare LF", "$3\nabc\r\n", "", false, false},
		{"empty", "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored, free, ok := parseBulkReply([]byte(tc.raw))
			if ok != tc.valid || free != tc.free || string(stored) != tc.stored {
				t.Fatalf("parseBulkReply(%q) = %q, free %v, ok %v; want %q, %v, %v", tc.raw, stored, free, ok, tc.stored, tc.free, tc.valid)
			}
		})
	}
}

// FuzzParseBulkReply: a reply it accepts is exactly a bulk string of what it returns, and every
// bulk string is read back as itself.
func FuzzParseBulkReply(f *testing.F) {
	f.Add([]byte("$-1\r\n"))
	f.Add([]byte("_\r\n"))
	f.Add(bulkReply("\x01Pabc"))
	f.Add([]byte("-ERR x\r\n"))
	f.Add([]byte("$3\r\nab"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		stored, free, ok := parseBulkReply(raw)
		switch {
		case ok && free:
			if string(raw) != "$-1\r\n" && string(raw) != "_\r\n" {
				t.Fatalf("%q read as a null", raw)
			}
		case ok:
			if want := bulkReply(string(stored)); !bytes.Equal(raw, want) {
				t.Fatalf("%q read as %q, which is sent as %q", raw, stored, want)
			}
		case stored != nil || free:
			t.Fatalf("%q refused, yet read as %q (free %v)", raw, stored, free)
		}
		if got, free, ok := parseBulkReply(bulkReply(string(raw))); !ok || free || !bytes.Equal(got, raw) {
			t.Fatalf("bulk string of %q read as %q, free %v, ok %v", raw, got, free, ok)
		}
	})
}

// A standalone client reads the claim raw: a free key's null and a record's bulk string in both
// protocols, through a first execution, a replay and a duplicate in progress, in one command each.
func TestRawClaimInBothProtocols(t *testing.T) {
	srv := testsupport.StartRedis(t)
	for _, protocol := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(protocol), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: protocol})
			defer c.Close()
			sent := &testsupport.CommandCounter{}
			c.AddHook(sent)
			g, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			key := Key{Scope: "raw", ID: "resp" + strconv.Itoa(protocol)}
			fp := FingerprintOf([]byte("payload"))
			out, err := g.Do(ctx, key, fp, okWork("done"))
			if err != nil || out.Kind != Executed {
				t.Fatalf("first: %v, %v; want Executed", out.Kind, err)
			}
			g2, _ := New(c) // no local cache: the replay comes from the claim's reply
			before := sent.Commands.Load()
			out, err = g2.Do(ctx, key, fp, okWork("again"))
			if err != nil || out.Kind != Replayed || string(out.Result.Body) != "done" || out.Result.Status != 200 {
				t.Fatalf("replay: %v %+v, %v; want the first result replayed", out.Kind, out.Result, err)
			}
			if n := sent.Commands.Load() - before; n != 1 {
				t.Fatalf("replay sent %d commands, want 1", n)
			}
			busy := Key{Scope: "raw", ID: "busy" + strconv.Itoa(protocol)}
			if err := c.Set(ctx, busy.redisKey(defaultPrefix), encodeInProgress(token{9}, fp, time.Now().Add(time.Hour)), 0).Err(); err != nil {
				t.Fatal(err)
			}
			if out, err := g2.Do(ctx, busy, fp, okWork("x")); out.Kind != InProgress {
				t.Fatalf("duplicate: %v, %v; want InProgress", out.Kind, err)
			}
		})
	}
}

// A claim's error reply is not read raw: the claim is sent again as a typed command, which
// go-redis classifies and retries as any command's. On a replica every write is refused with
// READONLY: the outcome is Unavailable with the server's error, and nothing runs.
func TestRawClaimErrorReplyIsSentAgainTyped(t *testing.T) {
	primary := testsupport.StartRedis(t)
	replica := testsupport.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()))
	c := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: 1, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 2 * time.Millisecond})
	defer c.Close()
	sets := &setCounter{}
	c.AddHook(sets)
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	out, err := g.Do(context.Background(), Key{Scope: "raw", ID: "on-replica"}, Fingerprint{}, func(context.Context) (Result, error) {
		ran++
		return Result{Status: 200}, nil
	})
	if out.Kind != Unavailable || !errors.Is(err, ErrUnavailable) || err == nil || !strings.Contains(err.Error(), "READONLY") || ran != 0 {
		t.Fatalf("claim on a replica: %v, %v, ran %d; want Unavailable with READONLY and nothing run", out.Kind, err, ran)
	}
	if !isReply(err) {
		t.Fatalf("%v does not carry the server's error reply", err)
	}
	// Two commands from the client (the raw claim, then the typed one), three refusals at the
	// server: the typed claim was retried once, as go-redis retries a READONLY.
	if n := sets.n.Load(); n != 2 {
		t.Fatalf("the client sent the claim %d times, want 2 (raw, typed)", n)
	}
	if n := rejectedSets(t, c); n != 3 {
		t.Fatalf("the replica refused %d SETs, want 3 (raw, typed, retried)", n)
	}
}

// setCounter is a go-redis hook counting the SET commands a client processes.
type setCounter struct{ n atomic.Int64 }

func (*setCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *setCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "set" {
			s.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (*setCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// rejectedSets is how many SETs the server behind c refused, from INFO commandstats.
func rejectedSets(t *testing.T, c *redis.Client) int {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_set:"); ok {
			for _, field := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(field, "rejected_calls="); ok {
					n, err := strconv.Atoi(v)
					if err != nil {
						t.Fatal(err)
					}
					return n
				}
			}
		}
	}
	return 0
}

// A batch on a standalone client reads its claims raw too: free keys, completed and in-progress
// records in one pipeline, in both protocols.
func TestRawBatchClaimInBothProtocols(t *testing.T) {
	srv := testsupport.StartRedis(t)
	for _, protocol := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(protocol), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: protocol})
			defer c.Close()
			g, _ := New(c)
			ctx := context.Background()
			scope := "rawbatch" + strconv.Itoa(protocol)
			fp := FingerprintOf([]byte("payload"))
			done := Key{Scope: scope, ID: "done"}
			if out, err := g.Do(ctx, done, fp, okWork("earlier")); out.Kind != Executed {
				t.Fatal(out.Kind, err)
			}
			busy := Key{Scope: scope, ID: "busy"}
			if err := c.Set(ctx, busy.redisKey(defaultPrefix), encodeInProgress(token{9}, fp, time.Now().Add(time.Hour)), 0).Err(); err != nil {
				t.Fatal(err)
			}
			ran := 0
			work := func(context.Context) (Result, error) { ran++; return Result{Status: 201, Body: []byte("new")}, nil }
			g2, _ := New(c) // no local cache: the replay comes from the claim's reply
			outs, errs := g2.DoBatch(ctx, []Item{
				{Key: Key{Scope: scope, ID: "new"}, Fingerprint: fp, Work: work},
				{Key: done, Fingerprint: fp, Work: work},
				{Key: busy, Fingerprint: fp, Work: work},
			}, nil)
			if outs[0].Kind != Executed || outs[1].Kind != Replayed || string(outs[1].Result.Body) != "earlier" || outs[2].Kind != InProgress || ran != 1 {
				t.Fatalf("batch: %v %v %v (%v), ran %d; want Executed, Replayed, InProgress, one run", outs[0].Kind, outs[1].Kind, outs[2].Kind, errs, ran)
			}
			if outs[0].RoundTrips != 2 {
				t.Fatalf("batch took %d round trips, want 2", outs[0].RoundTrips)
			}
		})
	}
}

// A batch's claims answered with error replies are sent again typed, in one more pipeline: on a
// replica every item is Unavailable with READONLY, and nothing runs.
func TestRawBatchClaimErrorRepliesAreSentAgainTyped(t *testing.T) {
	primary := testsupport.StartRedis(t)
	replica := testsupport.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()))
	c := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: 1, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 2 * time.Millisecond})
	defer c.Close()
	g, _ := New(c)
	ran := 0
	work := func(context.Context) (Result, error) { ran++; return Result{Status: 200}, nil }
	items := []Item{{Key: Key{Scope: "rawbatch", ID: "a"}, Work: work}, {Key: Key{Scope: "rawbatch", ID: "b"}, Work: work}}
	outs, errs := g.DoBatch(context.Background(), items, nil)
	for i := range items {
		if outs[i].Kind != Unavailable || !errors.Is(errs[i], ErrUnavailable) || errs[i] == nil || !strings.Contains(errs[i].Error(), "READONLY") {
			t.Fatalf("item %d on a replica: %v, %v; want Unavailable with READONLY", i, outs[i].Kind, errs[i])
		}
	}
	if ran != 0 {
		t.Fatalf("%d works ran on a replica, want 0", ran)
	}
	// Per item: the raw claim, the typed one, its retry (the pipeline retried once).
	if n := rejectedSets(t, c); n != 3*len(items) {
		t.Fatalf("the replica refused %d SETs, want %d", n, 3*len(items))
	}
}
