package idem

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Fencing tokens (WithFencing). A claim of a guard built with WithFencing is one call of
// claim_fenced.lua instead of SET NX PX GET: still one round trip, but a script run, which
// is why it is an option. The token lives in the claim's record, after its header, so that
// a claim retried after a lost reply finds it again, and in a counter beside the record.

var (
	//go:embed claim_fenced.lua
	claimFencedSource string

	claimFencedScript = redis.NewScript(claimFencedSource)
)

// fenceSuffix names a key's fence counter: <record key>:fence, which keeps the record's hash tag
// and so its cluster slot. No record key ends this way: they end with the tag's closing brace.
const fenceSuffix = ":fence"

// WithFencing gives every claim a fencing token: a number larger than the token of every
// earlier claim of the same key, whether that claim completed, was released or expired. The
// work reads it with FenceFrom and passes it to the store it writes to, which refuses a write
// whose token is lower than one it already accepted: the write of an owner that was paused past
// its claim while another took the key over.
//
// The claim stays one round trip, a Lua script instead of SET NX PX GET. The token is
// max(counter + 1, the server's TIME in microseconds); the counter is a key beside the record,
// in the same cluster slot, that lives for the result TTL from the key's last claim, as long as a
// result would, so that keys no longer used leave nothing behind. Without the counter
// (expired, evicted, or lost in a failover to a replica that had not received it) the server's
// clock keeps the tokens increasing, as long as it has not been set back by more than the time
// between the two claims. Default off.
func WithFencing() Option { return func(o *options) { o.fencing = true } }

// fenceKey is the context key of a fencing token.
type fenceKey struct{}

// FenceFrom returns the fencing token of the claim under which ctx's work runs, when the guard
// was built with WithFencing; outside a guard's work, the token ContextWithFence put in ctx. ok
// is false in the work of a guard without fencing, and in a context that carries no token.
func FenceFrom(ctx context.Context) (fence uint64, ok bool) {
	fence, ok = ctx.Value(fenceKey{}).(uint64)
	return fence, ok
}

// ContextWithFence returns a copy of ctx that carries fence, for code that receives a token
// from elsewhere (a message, another process) and calls a store that reads it with FenceFrom.
func ContextWithFence(ctx context.Context, fence uint64) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence)
}

// claimFencedArgs returns the keys and arguments of the fenced claim of c.
func (g *Guard) claimFencedArgs(c *call) ([]string, []any) {
	counterTTL := g.opts.resultTTL.Milliseconds()
	return []string{c.rk, c.rk + fenceSuffix}, []any{c.claim, c.lockTTL.Milliseconds(), counterTTL}
}

// claimFenced is Do's claim for a guard with fencing: it returns what the SET NX PX GET of the
// default path would (a record, or redis.Nil when the key was free, then c.fence holds our
// token) and the round trips it took.
func (g *Guard) claimFenced(ctx context.Context, c *call) (string, int, error) {
	keys, args := g.claimFencedArgs(c)
	cmd, trips := g.scripts.call(ctx, claimFencedScript, keys, args...)
	stored, err := fencedReply(c, cmd)
	return stored, trips, err
}

// fencedReply reads the fenced claim's reply as the reply of SET NX PX GET: the record there, or
// redis.Nil, our token then in c.fence.
func fencedReply(c *call, cmd *redis.Cmd) (string, error) {
	v, err := cmd.Result()
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		if v <= 0 {
			return "", fmt.Errorf("idem: claim: fencing token %d is not positive", v)
		}
		c.fence = uint64(v)
		return "", redis.Nil
	}
	return "", fmt.Errorf("idem: claim: unexpected reply %T to the fenced claim", v)
}

// parseFence reads the decimal token after a fenced in-progress record's header.
func parseFence(b []byte) (uint64, error) {
	if len(b) > 20 || len(b) == 0 || b[0] == '0' {
		return 0, errors.New("malformed fencing token")
	}
	f, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, errors.New("malformed fencing token")
	}
	return f, nil
}

// claimBatchFenced sends the fenced claim of every item of idx, in pipelines of at most
// pipelineKeys, once more with the script's source for those a server answered NOSCRIPT, leaves
// each reply in the item's reply, and returns the round trips it took.
func (g *Guard) claimBatchFenced(ctx context.Context, b []batchItem, idx []int) int {
	bySource := !g.scripts.known(claimFencedScript)
	send := func(p redis.Pipeliner, c *batchItem) *redis.Cmd {
		keys, args := g.claimFencedArgs(&c.call)
		if bySource {
			return claimFencedScript.Eval(ctx, p, keys, args...)
		}
		return claimFencedScript.EvalSha(ctx, p, keys, args...)
	}
	trips := g.pipelined(ctx, b, idx, send)
	var again []int
	for _, i := range idx {
		err := b[i].reply.Err()
		if bySource {
			g.scripts.learn(claimFencedScript, err)
		} else if err != nil && isNoScript(err) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		bySource = true
		trips += g.pipelined(ctx, b, again, send)
		for _, i := range again {
			g.scripts.learn(claimFencedScript, b[i].reply.Err())
		}
	}
	return trips
}

// claimReply reads a batch item's claim reply as SET NX PX GET's: the record there, or
// redis.Nil for a key now ours.
func (g *Guard) claimReply(c *batchItem) ([]byte, error) {
	if c.raw != nil {
		return c.stored, c.claimErr
	}
	var stored string
	var err error
	if g.opts.fencing {
		stored, err = fencedReply(&c.call, c.reply)
	} else {
		stored, err = c.reply.Text()
	}
	return []byte(stored), err
}
