package testsupport

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"
)

// Miniredis is a miniredis server started by [StartMiniredis]: every method of
// *miniredis.Miniredis, and clients for it.
type Miniredis struct {
	*miniredis.Miniredis
	t testing.TB
}

// NewClient returns a go-redis client for the server, closed at cleanup.
func (m *Miniredis) NewClient() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	m.t.Cleanup(func() { c.Close() })
	return c
}

// StartMiniredis starts a miniredis, an in-process Redis for fast unit tests, and closes it at
// cleanup. Unlike a bare miniredis it runs scripts that begin with a shebang line
// (#!lua flags=allow-oom), as Redis 7 does: miniredis's Lua compiler cannot parse that line,
// so this server drops it before compiling (miniredis has no memory limit for the flags to
// matter) and answers EVALSHA with the SHA1 of the script as sent.
func StartMiniredis(t testing.TB) *Miniredis {
	t.Helper()
	m := miniredis.RunT(t)
	srv := m.Server()
	var mu sync.Mutex
	bodies := map[string]string{} // SHA1 of a script with a shebang -> SHA1 of its body
	srv.SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if len(args) == 0 {
			return false
		}
		switch cmd {
		case "EVAL", "EVAL_RO":
			script, ok := strings.CutPrefix(args[0], "#!")
			if !ok {
				return false
			}
			_, body, _ := strings.Cut(script, "\n")
			mu.Lock()
			bodies[sha1Hex(args[0])] = sha1Hex(body)
			mu.Unlock()
			srv.Dispatch(c, append([]string{cmd, body}, args[1:]...))
			return true
		case "EVALSHA", "EVALSHA_RO":
			mu.Lock()
			sha, ok := bodies[strings.ToLower(args[0])]
			mu.Unlock()
			if !ok {
				return false
			}
			srv.Dispatch(c, append([]string{cmd, sha}, args[1:]...))
			return true
		}
		return false
	})
	return &Miniredis{Miniredis: m, t: t}
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
