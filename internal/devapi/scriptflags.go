package devapi

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// scriptFlags is a go-redis hook for the client of the embedded Redis (miniredis), whose Lua
// compiler cannot parse the shebang line (#!lua flags=allow-oom) that the core's scripts begin
// with for Redis 7 and Valkey. It sends every EVAL without that line, and every EVALSHA of such a
// script with the SHA1 of the script as miniredis compiled it. The flags have nothing to do there:
// allow-oom matters only under a memory limit, and miniredis has none.
type scriptFlags struct {
	mu sync.Mutex
	// bodies maps the SHA1 of a script as sent to the SHA1 of its body without the shebang.
	bodies map[string]string
}

func (s *scriptFlags) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *scriptFlags) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.rewrite(cmd)
		return next(ctx, cmd)
	}
}

func (s *scriptFlags) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			s.rewrite(cmd)
		}
		return next(ctx, cmds)
	}
}

// rewrite drops the shebang line of an EVAL's script in place, and points an EVALSHA of a script
// that had one at the script miniredis compiled.
func (s *scriptFlags) rewrite(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 {
		return
	}
	arg, ok := args[1].(string)
	if !ok {
		return
	}
	switch cmd.Name() {
	case "eval", "eval_ro":
		if !strings.HasPrefix(arg, "#!") {
			return
		}
		_, body, _ := strings.Cut(arg, "\n")
		s.mu.Lock()
		if s.bodies == nil {
			s.bodies = map[string]string{}
		}
		s.bodies[sha1Hex(arg)] = sha1Hex(body)
		s.mu.Unlock()
		args[1] = body
	case "evalsha", "evalsha_ro":
		s.mu.Lock()
		sha, ok := s.bodies[strings.ToLower(arg)]
		s.mu.Unlock()
		if ok {
			args[1] = sha
		}
	}
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
