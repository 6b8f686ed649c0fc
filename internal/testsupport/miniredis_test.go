package testsupport_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
)

// A script with a shebang line runs on StartMiniredis's server, by source and then by the SHA1
// of the source as sent, as on Redis 7.
func TestMiniredisRunsScriptsWithAShebang(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	c := m.NewClient()
	ctx := context.Background()
	s := redis.NewScript("#!lua flags=allow-oom\nreturn redis.call('SET', KEYS[1], ARGV[1])")
	if _, err := s.EvalSha(ctx, c, []string{"k"}, "v0").Result(); !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Fatalf("EVALSHA of a script never sent: %v, want NOSCRIPT", err)
	}
	if err := s.Eval(ctx, c, []string{"k"}, "v1").Err(); err != nil {
		t.Fatalf("EVAL: %v", err)
	}
	if err := s.EvalSha(ctx, c, []string{"k"}, "v2").Err(); err != nil {
		t.Fatalf("EVALSHA after EVAL: %v", err)
	}
	if v, _ := m.Get("k"); v != "v2" {
		t.Fatalf("k = %q, want v2", v)
	}
	plain := redis.NewScript("return 7")
	if n, err := plain.Run(ctx, c, nil).Int(); err != nil || n != 7 {
		t.Fatalf("a script without a shebang: %d, %v", n, err)
	}
}

func TestCommandStatsCountsEachCommand(t *testing.T) {
	c := testsupport.StartRedis(t).NewClient()
	ctx := context.Background()
	before := testsupport.CommandStats(t, c)
	for range 3 {
		c.Set(ctx, "k", "v", 0)
	}
	c.Get(ctx, "k")
	after := testsupport.CommandStats(t, c)
	if d := after["set"] - before["set"]; d != 3 {
		t.Errorf("set counted %d times, want 3", d)
	}
	if d := after["get"] - before["get"]; d != 1 {
		t.Errorf("get counted %d times, want 1", d)
	}
	if after["info"] < 1 {
		t.Errorf("info not counted: %v", after)
	}
}
