package idem

import (
	"context"
	_ "embed"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed complete.lua
	completeSource string
	//go:embed release.lua
	releaseSource string

	completeScript = newScript(completeSource)
	releaseScript  = newScript(releaseSource)
)

// script is a Lua script as written, with its shebang flags (Redis 7, Valkey), and the same
// body without them for servers that cannot compile a shebang (the embedded miniredis).
type script struct {
	flagged, plain *redis.Script
}

func newScript(src string) script {
	plain := src
	if strings.HasPrefix(src, "#!") {
		_, plain, _ = strings.Cut(src, "\n")
	}
	return script{flagged: redis.NewScript(src), plain: redis.NewScript(plain)}
}

// Replies of the scripts.
const (
	scriptDone        = 1
	scriptAlreadyOurs = 2
	scriptGone        = 0
	scriptOtherOwner  = -1
	scriptResultKept  = -2
)

// scriptRunner calls scripts and remembers whether the server understands shebang flags.
type scriptRunner struct {
	client Client
	plain  atomic.Bool
	// sent holds the scripts whose source this runner has had a server compile.
	sent sync.Map // *redis.Script -> struct{}
}

// run calls a script. A server that cannot compile the shebang line gets the plain body from
// then on. It returns the script's reply and the number of round trips it took.
func (r *scriptRunner) run(ctx context.Context, s script, keys []string, args ...any) (int64, int, error) {
	if s.flagged == s.plain || r.plain.Load() {
		return r.eval(ctx, s.plain, keys, args...)
	}
	n, trips, err := r.eval(ctx, s.flagged, keys, args...)
	if err == nil || !redis.HasErrorPrefix(err, "Error compiling script") {
		return n, trips, err
	}
	r.plain.Store(true)
	n, more, err := r.eval(ctx, s.plain, keys, args...)
	return n, trips + more, err
}

// eval sends a script's source (EVAL) the first time this runner calls it, and its SHA
// (EVALSHA) after that. The first call costs one round trip either way, and a server that never
// saw the script (a new or restarted server, the embedded one of a local run) needs no NOSCRIPT
// round trip. EVALSHA falls back to EVAL after NOSCRIPT (a failover, SCRIPT FLUSH, another
// cluster node).
func (r *scriptRunner) eval(ctx context.Context, s *redis.Script, keys []string, args ...any) (int64, int, error) {
	if _, ok := r.sent.Load(s); !ok {
		n, err := s.Eval(ctx, r.client, keys, args...).Int64()
		if err == nil || isReply(err) {
			r.sent.Store(s, struct{}{})
		}
		return n, 1, err
	}
	n, err := s.EvalSha(ctx, r.client, keys, args...).Int64()
	if err == nil || !isNoScript(err) {
		return n, 1, err
	}
	n, err = s.Eval(ctx, r.client, keys, args...).Int64()
	return n, 2, err
}

// isReply reports whether err is the server's answer (an error reply or a nil reply) rather than
// a failure to reach it.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}
