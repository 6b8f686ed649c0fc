package testsupport

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/embeddedredis"
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
// (#!lua flags=allow-oom), as Redis 7 does (embeddedredis.RunShebangScripts).
func StartMiniredis(t testing.TB) *Miniredis {
	t.Helper()
	m := miniredis.RunT(t)
	embeddedredis.RunShebangScripts(m)
	return &Miniredis{Miniredis: m, t: t}
}
