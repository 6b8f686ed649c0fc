package idem

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// How a guard stores a result in place of its claim.
const (
	// completeByScript is complete.lua: the default, and what every server since Redis 7.0 runs.
	completeByScript int32 = iota
	// completeBySet is one plain command, SET key result IFEQ claim PX ttl GET, chosen with
	// WithConditionalSet. Servers with a conditional SET (Valkey 8.1 and later, Redis 8.4 and
	// later) run it as one SET: no script, and INFO commandstats counts one command instead of a
	// script and the two it calls. A guard switches to the script for good the first time a
	// server answers it with a syntax error.
	completeBySet
)

// completer stores results, with the conditional SET while it is chosen and the server
// understands it, else with the script.
type completer struct {
	client  Client
	scripts *scriptRunner
	mode    atomic.Int32
}

// complete stores enc, the completed record, in place of claim, only while the record at rk is
// still exactly claim. It returns one of the scripts' replies (scriptDone, scriptAlreadyOurs,
// scriptGone, scriptOtherOwner) and the round trips it took.
func (c *completer) complete(ctx context.Context, rk string, claim, enc []byte, ttlMillis int64) (int64, int, error) {
	owner := claim[:ownerPrefixSize]
	if c.mode.Load() == completeByScript {
		return c.scripts.run(ctx, completeScript, []string{rk}, owner, enc, ttlMillis)
	}
	old, err := c.client.Do(ctx, "set", rk, enc, "ifeq", claim, "px", ttlMillis, "get").Text()
	switch {
	case errors.Is(err, redis.Nil):
		// IFEQ never creates a key: nothing was there, nothing was written.
		return scriptGone, 1, nil
	case err == nil:
		return classifyPrevious([]byte(old), claim), 1, nil
	case redis.HasErrorPrefix(err, "syntax error"):
		// A server without IFEQ (Redis before 8.4, Valkey before 8.1, miniredis) rejected the
		// command before running it: nothing was written.
		c.mode.Store(completeByScript)
	case redis.HasErrorPrefix(err, "OOM"):
		// Under noeviction a full server refuses every SET; the script is flagged allow-oom so the
		// result of work that already ran is still stored. The next call tries SET again.
	default:
		return 0, 1, err
	}
	n, trips, err := c.scripts.run(ctx, completeScript, []string{rk}, owner, enc, ttlMillis)
	return n, trips + 1, err
}

// classifyPrevious turns the value a conditional SET replaced, or found, into the scripts' reply:
// the set happened only when the previous value was our claim, byte for byte.
func classifyPrevious(old, claim []byte) int64 {
	switch {
	case bytes.Equal(old, claim):
		return scriptDone
	case len(old) >= ownerPrefixSize && old[1] == kindCompleted && bytes.Equal(old[2:ownerPrefixSize], claim[2:ownerPrefixSize]):
		// Our own result, stored by an earlier attempt of this call whose reply was lost.
		return scriptAlreadyOurs
	default:
		return scriptOtherOwner
	}
}
