package idem

import (
	"context"
	_ "embed"
	"errors"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed complete.lua
	completeSource string
	//go:embed release.lua
	releaseSource string

	completeScript = redis.NewScript(completeSource)
	releaseScript  = redis.NewScript(releaseSource)
)

// Replies of the scripts.
const (
	scriptDone        = 1
	scriptAlreadyOurs = 2
	scriptGone        = 0
	scriptOtherOwner  = -1
	scriptResultKept  = -2
)

// runScript calls a script by SHA and sends its source only when the server does not know it
// yet (NOSCRIPT: a new server, a failover or SCRIPT FLUSH). It returns the script's reply and
// the number of round trips it took.
func runScript(ctx context.Context, c Client, s *redis.Script, keys []string, args ...any) (int64, int, error) {
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
