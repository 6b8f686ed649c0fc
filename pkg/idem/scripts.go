package idem

import (
	"context"
	_ "embed"
	"errors"
	"strings"
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

// scriptRunner calls scripts by SHA and remembers whether the server understands shebang flags.
type scriptRunner struct {
	client Client
	plain  atomic.Bool
}

// run calls a script by SHA and sends its source only when the server does not know it yet
// (NOSCRIPT: a new server, a failover or SCRIPT FLUSH). A server that cannot compile the shebang
// line gets the plain body from then on. It returns the script's reply and the number of round
// trips it took.
func (r *scriptRunner) run(ctx context.Context, s script, keys []string, args ...any) (int64, int, error) {
	if s.flagged == s.plain || r.plain.Load() {
		return evalBySHA(ctx, r.client, s.plain, keys, args...)
	}
	n, trips, err := evalBySHA(ctx, r.client, s.flagged, keys, args...)
	if err == nil || !redis.HasErrorPrefix(err, "Error compiling script") {
		return n, trips, err
	}
	r.plain.Store(true)
	n, more, err := evalBySHA(ctx, r.client, s.plain, keys, args...)
	return n, trips + more, err
}

func evalBySHA(ctx context.Context, c Client, s *redis.Script, keys []string, args ...any) (int64, int, error) {
	n, err := s.EvalSha(ctx, c, keys, args...).Int64()
	if err == nil || !isNoScript(err) {
		return n, 1, err
	}
	n, err = s.Eval(ctx, c, keys, args...).Int64()
	return n, 2, err
}

func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}
