package idem

import (
	"context"
	_ "embed"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed complete.lua
	completeSource string
	//go:embed release.lua
	releaseSource string
	//go:embed finish.lua
	finishSource string

	completeScript = redis.NewScript(completeSource)
	releaseScript  = redis.NewScript(releaseSource)
	finishScript   = redis.NewScript(finishSource)
)

// Replies of the scripts.
const (
	scriptDone        = 1
	scriptAlreadyOurs = 2
	scriptGone        = 0
	scriptOtherOwner  = -1
	scriptResultKept  = -2
)

// scriptRunner calls scripts, sending a script's source the first time and its SHA after that.
type scriptRunner struct {
	client Client
	// sent holds the scripts whose source this runner has had a server compile.
	sent sync.Map // *redis.Script -> struct{}
}

// run sends a script's source (EVAL) the first time this runner calls it, and its SHA
// (EVALSHA) after that. The first call costs one round trip either way, and a server that never
// saw the script (a new or restarted server) needs no NOSCRIPT round trip. EVALSHA falls back to
// EVAL after NOSCRIPT (a failover, SCRIPT FLUSH, another cluster node). It returns the script's
// reply and the number of round trips it took.
func (r *scriptRunner) run(ctx context.Context, s *redis.Script, keys []string, args ...any) (int64, int, error) {
	cmd, trips := r.call(ctx, s, keys, args...)
	n, err := cmd.Int64()
	return n, trips, err
}

// call is run for any reply: it returns the script's command and the round trips it took.
func (r *scriptRunner) call(ctx context.Context, s *redis.Script, keys []string, args ...any) (*redis.Cmd, int) {
	if !r.known(s) {
		cmd := s.Eval(ctx, r.client, keys, args...)
		r.learn(s, cmd.Err())
		return cmd, 1
	}
	cmd := s.EvalSha(ctx, r.client, keys, args...)
	if err := cmd.Err(); err == nil || !isNoScript(err) {
		return cmd, 1
	}
	return s.Eval(ctx, r.client, keys, args...), 2
}

// known reports whether a server already compiled s for this runner.
func (r *scriptRunner) known(s *redis.Script) bool {
	_, ok := r.sent.Load(s)
	return ok
}

// learn records that s was compiled, when err, the reply to an EVAL of s, says the server ran it.
func (r *scriptRunner) learn(s *redis.Script, err error) {
	if err == nil || isReply(err) {
		r.sent.Store(s, struct{}{})
	}
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
