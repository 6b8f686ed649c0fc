// Package embeddedredis makes a miniredis, the in-process Redis of the local API and of the fast
// unit tests, run the core's scripts as Redis 7 does. They begin with a shebang line
// (#!lua flags=allow-oom) that miniredis's Lua compiler cannot parse; the flags have nothing to do
// there, since allow-oom matters only under a memory limit and miniredis has none. Only the local
// API and the tests use it: no deployed bootstrap links miniredis.
package embeddedredis

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// RunShebangScripts makes m drop a script's shebang line before compiling it, and answer an
// EVALSHA of the script as sent with the script it compiled.
func RunShebangScripts(m *miniredis.Miniredis) {
	srv := m.Server()
	var mu sync.Mutex
	bodies := map[string]string{} // SHA1 of a script with a shebang -> SHA1 of its body
	srv.SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if len(args) == 0 {
			return false
		}
		mu.Lock()
		script, shebang := strings.CutPrefix(args[0], "#!")
		sha, known := bodies[strings.ToLower(args[0])]
		switch {
		case shebang && (cmd == "EVAL" || cmd == "EVAL_RO"):
			_, body, _ := strings.Cut(script, "\n")
			bodies[sha1Hex(args[0])], sha = sha1Hex(body), body
		case !known || cmd != "EVALSHA" && cmd != "EVALSHA_RO":
			mu.Unlock()
			return false
		}
		mu.Unlock()
		srv.Dispatch(c, append([]string{cmd, sha}, args[1:]...))
		return true
	})
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
