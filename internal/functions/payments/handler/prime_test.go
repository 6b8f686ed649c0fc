package handler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/testsupport"
)

// commandLog records the name of every command a client sends, pipelines included, and the
// error of a single command other than a nil reply.
type commandLog struct{ names []string }

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		l.names = append(l.names, cmd.FullName())
		if err != nil && err != redis.Nil {
			l.names = append(l.names, "("+err.Error()+")")
		}
		return err
	}
}
func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			l.names = append(l.names, c.FullName())
		}
		return next(ctx, cmds)
	}
}

// Prime runs one synthetic payment at init that leaves nothing behind (no key outlives a
// millisecond, no log line but the init line, nothing in the ledger), has the server compile the scripts, and
// makes the first real request send the completion script's SHA, not its source.
func TestPrimeLeavesNothingAndTheFirstRequestSendsTheScriptSHA(t *testing.T) {
	e := sharedEnv(t)
	client := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr()})
	t.Cleanup(func() { client.Close() })
	var sent commandLog
	client.AddHook(&sent)
	logs := &logBuffer{}
	h := newHandler(t, e, handler.WithRedis(client), handler.WithLogOutput(logs))

	if err := h.Prime(context.Background()); err != nil {
		t.Fatalf("Prime: %v", err)
	}
	primed := strings.Join(sent.names, " ")
	for _, want := range []string{"script", "eval"} { // the fenced claim is a script: no SET
		if !strings.Contains(primed, want) {
			t.Errorf("Prime sent %q, want a %s among them", primed, want)
		}
	}
	// One line: the init line, naming the cache's eviction policy; nothing of the synthetic payment.
	if primeLog := logs.String(); strings.Count(primeLog, "\n") != 1 || !strings.Contains(primeLog, `"msg":"init"`) ||
		!strings.Contains(primeLog, `"eviction_policy":`) {
		t.Errorf("Prime wrote, want only the init line with the eviction policy:\n%s", primeLog)
	}
	time.Sleep(20 * time.Millisecond) // the synthetic result's millisecond, with room
	if keys, err := client.Keys(context.Background(), e["IDEM_KEY_PREFIX"]+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys left under the prefix after Prime: %v %v", keys, err)
	}

	sent.names = nil
	if resp := do(t, h, post(t, "first-after-prime", `{"amount":2500,"currency":"EUR"}`)); resp.StatusCode != 201 {
		t.Fatalf("first request after Prime: %d %s", resp.StatusCode, resp.Body)
	}
	if got := strings.Join(sent.names, " "); got != "evalsha evalsha" {
		t.Errorf("the first request sent %q, want the fenced claim and the completion by SHA: \"evalsha evalsha\"", got)
	}
	if n := strings.Count(logs.String(), "\n"); n != 2 {
		t.Errorf("%d log lines after Prime and one request, want 2 (init, request):\n%s", n, logs)
	}
}

// With Redis unreachable, Prime returns its error within the bound its context gives, so the
// init it runs in never waits longer.
func TestPrimeReturnsWithinItsBoundWhenRedisIsDown(t *testing.T) {
	addr, _ := testsupport.SilentListener(t) // accepts, never answers
	h := newHandler(t, env{"REDIS_URL": "redis://" + addr})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := h.Prime(ctx); err == nil {
		t.Fatal("Prime succeeded against a Redis that never answers")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Prime took %s with a 200ms bound", d)
	}
}
