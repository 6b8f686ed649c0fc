package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// guardScript is a script with its source, for SCRIPT LOAD.
type guardScript struct {
	script *redis.Script
	source string
}

// guardScripts are the scripts a guard may call, with their source: completion, release and
// the batch's finish, and the ordered claim, completion and release (ordering.go).
var guardScripts = []guardScript{{completeScript, completeSource}, {releaseScript, releaseSource}, {finishScript, finishSource},
	{claimOrderedScript, claimOrderedSource}, {completeOrderedScript, completeOrderedSource}, {releaseOrderedScript, releaseOrderedSource}}

// Warm readies g for its first call, for a function's init: the server compiles every script
// the guard may call (on a cluster, every node; the fenced claim's too, with WithFencing), so that the first completion or release sends
// only the script's SHA and the server finds it compiled. It costs one round trip on a single
// server (the loads are pipelined), one per script on a cluster (each reaching every node in
// parallel), and writes no key.
//
// After an error, a script Warm could not load is sent with its source on its first call, as
// without Warm.
// Bound it with ctx, so an unreachable server cannot hold the init (the client must honour
// context deadlines, as redisconn's clients do: go-redis's ContextTimeoutEnabled).
//
// Warm also reads the store's maxmemory-policy from INFO memory, in the same round trip on a
// single server, in one more on a cluster (from every primary, in parallel), for
// EvictionPolicy to report and WithUnsafeEviction to act on; a policy it could not read is read
// by the first call under EvictionRefuse.
func (g *Guard) Warm(ctx context.Context) error {
	var (
		cmds []*redis.StringCmd
		perr error // reading the eviction policy
	)
	scripts := guardScripts
	if g.opts.fencing {
		scripts = append(scripts[:len(scripts):len(scripts)], struct {
			script *redis.Script
			source string
		}{claimFencedScript, claimFencedSource})
	}
	if _, cluster := g.client.(*redis.ClusterClient); cluster {
		// A cluster client sends SCRIPT LOAD to every node itself; a pipeline would reach one.
		for _, s := range scripts {
			cmds = append(cmds, g.client.ScriptLoad(ctx, s.source))
		}
		_, perr = g.learnEvictionPolicy(ctx)
	} else {
		// Not Script.Load: on a pipeline it would record the still empty reply as the SHA.
		p := g.client.Pipeline()
		for _, s := range scripts {
			cmds = append(cmds, p.ScriptLoad(ctx, s.source))
		}
		info := p.Info(ctx, "memory") // in the same round trip
		_, _ = p.Exec(ctx)            // each command carries its own error, checked below
		perr = g.learnEvictionPolicyFrom(info.Result())
	}
	return errors.Join(g.learnScripts(scripts, cmds), perr)
}

// learnScripts records the scripts whose SCRIPT LOAD, cmds in the order of guardScripts,
// succeeded, and returns the first failure.
func (g *Guard) learnScripts(scripts []guardScript, cmds []*redis.StringCmd) error {
	for i, cmd := range cmds {
		s := scripts[i].script
		switch sha, err := cmd.Result(); {
		case err != nil:
			return fmt.Errorf("idem: warm-up: load script %d of %d: %w", i+1, len(cmds), err)
		case sha != s.Hash():
			return fmt.Errorf("idem: warm-up: the server named script %d %q, want %q", i+1, sha, s.Hash())
		}
		g.scripts.learn(s, nil)
	}
	return nil
}
