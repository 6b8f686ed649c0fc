package idem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrReplicasNotAcknowledged: fewer replicas than WithMinReplicas asks for acknowledged a claim
// within its timeout (or the server refused WAIT), so the claim was released and nothing ran. The
// error of such an Unavailable outcome, and the one Wrap returns, match both it and
// ErrUnavailable. The error of a NotStored outcome of Do matches it alone when the work ran and
// its result was stored, but too few replicas acknowledged the result.
var ErrReplicasNotAcknowledged = errors.New("idem: replicas did not acknowledge the claim")

// WithMinReplicas makes every claim wait until at least n replicas of the key's primary have
// acknowledged it, for at most timeout: a WAIT n timeout pipelined after the claim's SET, in the
// claim's round trip, on the primary that holds the key (on a cluster, the key's node). When
// fewer acknowledge in time, the claim is released (one more round trip), nothing runs, and the
// outcome is Unavailable with an error matching ErrReplicasNotAcknowledged: a claim that a
// failover could lose never lets work run. A first execution that succeeds costs the timeout at
// most on top of its round trip, usually the replica's lag.
//
// It protects the claim; the completion it can only report on. Do and DoBatch pipeline one more
// WAIT after the completion, in the completion's round trip. When fewer replicas acknowledge the
// result in time, Do and DoBatch send the completion again with its WAIT, up to
// completionResends (2) more times while the next WAIT would end before the claim expires and
// before the caller's deadline (less answerMargin, 100ms, for the answer): a slow replica
// acknowledges a later one, and after a failover the completion reaches the new primary, which
// holds the claim, and stores the result there. When none is acknowledged the outcome is
// NotStored (the observer hears of it) rather than Executed: the work ran and its result is on
// the primary, but a failover before the replicas have it loses it, the claim a replica holds
// keeps the key in progress until the claim's TTL, and the work then runs again on the next
// delivery (docs/reliability.md measures it). Failing the work instead would not undo it.
//
// timeout must be at least 1ms (WAIT's 0 would block forever) and should stay well below the
// client's read timeout, or a slow replica turns into a client timeout. n 0 turns it off, the
// default. It applies to *redis.Client and *redis.ClusterClient; replies of a key already
// claimed or completed are answered as without it. It cannot be combined with WithFencing (New
// refuses both): a fenced claim is a script, and its downstream check already refuses the
// writer a failover left behind.
func WithMinReplicas(n int, timeout time.Duration) Option {
	return func(o *options) { o.minReplicas, o.replicaTimeout = n, timeout }
}

func (o options) validateReplicas() error {
	switch {
	case o.minReplicas < 0:
		return fmt.Errorf("idem: %d minimum replicas is negative", o.minReplicas)
	case o.minReplicas > 0 && o.replicaTimeout < time.Millisecond:
		return fmt.Errorf("idem: replica timeout %s is below 1ms", o.replicaTimeout)
	case o.minReplicas > 0 && o.fencing:
		return errors.New("idem: WithMinReplicas and WithFencing together are not supported")
	}
	return nil
}

// sendClaim sends c's claim and returns its reply, the record already there (nil and redis.Nil
// when the key was free), and with WithMinReplicas the reply of the WAIT pipelined after it on
// the same connection (nil without). The record is the caller's: what is decoded from it may
// share its memory.
//
// A *redis.Client reads the reply raw (sendRawClaim). Any other client that can process a typed
// command (every go-redis client) reads it as a string directly, without the generic reply's
// boxing.
func (g *Guard) sendClaim(ctx context.Context, c *call) ([]byte, *redis.IntCmd, error) {
	args := claimArgs(c, nil)
	if g.opts.minReplicas == 0 {
		if rc, ok := g.client.(*redis.Client); ok {
			if stored, ok, err := sendRawClaim(ctx, rc, args); ok {
				return stored, nil, err
			}
		}
		if p, ok := g.client.(processor); ok {
			cmd := redis.NewStringCmd(ctx, args...)
			_ = p.Process(ctx, cmd) // the reply carries its own error
			stored, err := cmd.Bytes()
			return stored, nil, err
		}
		stored, err := g.client.Do(ctx, args...).Text()
		return []byte(stored), nil, err
	}
	pipe, err := g.keyPipeline(ctx, c.rk)
	if err != nil {
		return nil, nil, err
	}
	set := pipe.Do(ctx, args...)
	wait := g.waitCmd(ctx, pipe)
	_, _ = pipe.Exec(ctx) // each reply carries its own error
	if cc, ok := g.client.(*redis.ClusterClient); ok && movedSlot(set.Err()) {
		cc.ReloadState(ctx) // the next claim of a key of this slot goes to its new node
	}
	stored, err := set.Text()
	return []byte(stored), wait, err
}

// processor is the part of a go-redis client that runs a typed command.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// completionResends is how many more times Do and DoBatch send a completion that too few replicas
// acknowledged, each with its WAIT, while the claim still protects it and the invocation is not
// over: the next WAIT must end answerMargin before the claim's expiry and before the caller's
// deadline (a Lambda invocation's end), whichever comes first. The work's own deadline does not
// bound them: the work is over, and the complete script, which compares the owner token, stores
// nothing once another owner holds the key. A replica that was only slow acknowledges the next
// one; after a failover that moved the endpoint the completion reaches the new primary, which
// holds the claim (its WAIT made sure of it), and stores the result there, where the next
// delivery finds it. docs/reliability.md measures what it closes.
const completionResends = 2

// answerMargin is what a completion sent again leaves of the claim and the invocation, for its
// reply to be read and the caller's answer written.
const answerMargin = 100 * time.Millisecond

// complete stores c's result (or its not-replayable marker) with the complete script and returns
// the script's reply, the round trips it took and its error. With WithMinReplicas the script
// goes in a pipeline to the key's primary, followed by a WAIT in the same round trip; unacked is
// then the shortfall of replicas that acknowledged the completion (nil when enough did, or
// when none were asked for), after up to completionResends more sends.
func (g *Guard) complete(ctx context.Context, c *call) (n int64, trips int, unacked, err error) {
	keys, args := g.completionArgs(c)
	if g.opts.minReplicas == 0 {
		n, trips, err = g.scripts.run(ctx, completeScript, keys, args...)
		return n, trips, nil, err
	}
	n, trips, unacked, err = g.completeWaited(ctx, keys, args)
	for range completionResends {
		if unacked == nil || err != nil || !storedByUs(n) || !g.opts.now().Add(g.opts.replicaTimeout).Before(c.sendsEnd) {
			break
		}
		m, more, again, rerr := g.completeWaited(ctx, keys, args)
		trips += more
		if rerr != nil || !storedByUs(m) {
			break // the result was stored once: what the primary first answered stands
		}
		unacked = again
	}
	return n, trips, unacked, err
}

// storedByUs reports a reply of the complete script saying the key now holds our result.
func storedByUs(n int64) bool { return n == scriptDone || n == scriptAlreadyOurs }

// completeWaited is one send of the complete script with keys and args and a WAIT after it, in a
// pipeline to the key's primary: the script's reply, the round trips (2 when the server had lost
// the script), and the WAIT's shortfall (nil when enough replicas acknowledged).
func (g *Guard) completeWaited(ctx context.Context, keys []string, args []any) (n int64, trips int, unacked, err error) {
	pipe, err := g.keyPipeline(ctx, keys[0])
	if err != nil {
		return 0, 0, nil, err
	}
	send := func(bySource bool) (*redis.Cmd, *redis.IntCmd) {
		var cmd *redis.Cmd
		if bySource || !g.scripts.known(completeScript) {
			cmd = completeScript.Eval(ctx, pipe, keys, args...)
		} else {
			cmd = completeScript.EvalSha(ctx, pipe, keys, args...)
		}
		wait := g.waitCmd(ctx, pipe)
		_, _ = pipe.Exec(ctx) // each reply carries its own error
		trips++
		if cmd.Args()[0] == "eval" {
			g.scripts.learn(completeScript, cmd.Err())
		}
		return cmd, wait
	}
	cmd, wait := send(false)
	if err := cmd.Err(); err != nil && isNoScript(err) {
		cmd, wait = send(true) // the server lost its scripts (a failover): the source, once
	}
	if n, err = cmd.Int64(); err != nil {
		return n, trips, nil, err
	}
	return n, trips, g.resultShortfall(wait), nil
}

// resultShortfall returns nil when wait reports enough replicas holding a result, or the error
// that explains why not.
func (g *Guard) resultShortfall(wait *redis.IntCmd) error {
	switch acked, werr := wait.Result(); {
	case werr != nil:
		return fmt.Errorf("%w: the result: WAIT: %w", ErrReplicasNotAcknowledged, werr)
	case acked < int64(g.opts.minReplicas):
		return fmt.Errorf("%w: the result, %d of %d within %s", ErrReplicasNotAcknowledged,
			acked, g.opts.minReplicas, g.opts.replicaTimeout)
	}
	return nil
}

// completedDurably is completed for Do and DoBatch, which know whether enough replicas
// acknowledged the completion (unacked nil) when they asked for them: a result the primary
// stored but too few replicas acknowledged is NotStored, since a failover now would lose it. A
// marker (NotReplayable) stays what it is.
func (g *Guard) completedDurably(c *call, out Outcome, res Result, n int64, unacked, err error) (Outcome, error) {
	if unacked == nil || err != nil || !storedByUs(n) || c.unreplayable != nil {
		return g.completed(c, out, res, n, err)
	}
	out.Kind, out.Result, out.Ran = NotStored, res, true
	return out, fmt.Errorf("idem: result not stored durably: %w; a failover before the replicas have it loses it", unacked)
}

// waitCmd queues WAIT on pipe: it answers once enough replicas acknowledged every write the
// connection sent before it, or at the timeout, with how many did. The client's read timeout
// bounds its reply, as any other's.
func (g *Guard) waitCmd(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "wait", g.opts.minReplicas, g.opts.replicaTimeout.Milliseconds())
	_ = pipe.Process(ctx, cmd)
	return cmd
}

// keyPipeline returns a pipeline to the primary that holds key: WAIT counts the replicas of the
// node it runs on, and a cluster client would send it, a command without a key, to every node.
func (g *Guard) keyPipeline(ctx context.Context, key string) (redis.Pipeliner, error) {
	if cc, ok := g.client.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.Pipeline(), nil
	}
	return g.client.Pipeline(), nil
}

// movedSlot reports a reply saying the key's slot is served by another node.
func movedSlot(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK"))
}

// replicated settles a claim the guard holds against the reply of its WAIT: ok when enough
// replicas acknowledged it (or none were asked for); otherwise the claim is released and the
// outcome is Unavailable.
func (g *Guard) replicated(ctx context.Context, c *call, out Outcome, wait *redis.IntCmd) (Outcome, bool, error) {
	short := g.shortfall(wait)
	if short == nil {
		return out, true, nil
	}
	sctx := g.storeContext(ctx, c.storeEnd)
	defer endStore(sctx)
	n, trips, err := g.scripts.run(sctx, releaseScript, []string{c.rk}, c.owner())
	out.RoundTrips += trips
	out.Kind = Unavailable
	return out, false, unreleased(short, n, err)
}

// shortfall returns nil when wait reports enough replicas, or the error that explains why not.
func (g *Guard) shortfall(wait *redis.IntCmd) error {
	if wait == nil {
		return nil
	}
	n, err := wait.Result()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w: WAIT: %w", ErrUnavailable, ErrReplicasNotAcknowledged, err)
	case n < int64(g.opts.minReplicas):
		return fmt.Errorf("%w: %w: %d of %d within %s", ErrUnavailable, ErrReplicasNotAcknowledged,
			n, g.opts.minReplicas, g.opts.replicaTimeout)
	}
	return nil
}

// unreleased adds to short what the release of the claim answered (n, err: releaseScript's).
func unreleased(short error, n int64, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("idem: claim: %w (claim not released, it expires at its TTL: %v)", short, err)
	case n == scriptOtherOwner:
		return fmt.Errorf("idem: claim: %w (claim not released: the key is now held by another owner)", short)
	}
	return fmt.Errorf("idem: claim: %w (claim released)", short)
}

// claimBatchReplicated is DoBatch's claim with WithMinReplicas: the claims of idx go out as
// pipelined, grouped by the primary that holds their key, each pipeline ending with one WAIT
// that covers every claim before it; the groups go to their nodes in parallel. It leaves each
// claim's reply in its item and returns the WAIT reply of each item (indexed as b) and the round
// trips it took (those of the largest group: the nodes are asked at once).
func (g *Guard) claimBatchReplicated(ctx context.Context, b []batchItem, idx []int, px any) ([]*redis.IntCmd, int) {
	waits := make([]*redis.IntCmd, len(b))
	cc, cluster := g.client.(*redis.ClusterClient)
	trips := g.onPrimaries(ctx, b, idx, func(i int, err error) {
		b[i].reply = redis.NewCmd(ctx, claimArgs(&b[i].call, px)...)
		b[i].reply.SetErr(err)
	}, func(newPipe func() redis.Pipeliner, group []int) int {
		n := 0
		for part := range slices.Chunk(group, pipelineKeys) {
			pipe := newPipe()
			for _, i := range part {
				b[i].reply = pipe.Do(ctx, claimArgs(&b[i].call, px)...)
			}
			wait := g.waitCmd(ctx, pipe)
			_, _ = pipe.Exec(ctx)
			n++
			for _, i := range part {
				waits[i] = wait
			}
			if cluster && slices.ContainsFunc(part, func(i int) bool { return movedSlot(b[i].reply.Err()) }) {
				cc.ReloadState(ctx)
			}
		}
		return n
	})
	return waits, trips
}

// onPrimaries groups the items of idx by the primary that holds their key (one group on a
// client of one server; lost, with the error, the items whose primary a cluster client cannot
// tell), and runs send for each group, the groups in parallel, with a function that makes a
// pipeline to the group's primary (WAIT counts the replicas of the node it runs on). It returns
// the round trips of the slowest group, as send counts them: the nodes are asked at once.
func (g *Guard) onPrimaries(ctx context.Context, b []batchItem, idx []int, lost func(i int, err error), send func(newPipe func() redis.Pipeliner, group []int) int) int {
	groups := map[*redis.Client][]int{} // nil: the one server of a *redis.Client
	cc, cluster := g.client.(*redis.ClusterClient)
	for _, i := range idx {
		var node *redis.Client
		if cluster {
			var err error
			if node, err = cc.MasterForKey(ctx, b[i].rk); err != nil {
				lost(i, err)
				continue
			}
		}
		groups[node] = append(groups[node], i)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		trips int
	)
	for node, group := range groups {
		wg.Go(func() {
			newPipe := g.client.Pipeline
			if node != nil {
				newPipe = node.Pipeline
			}
			n := send(newPipe, group)
			mu.Lock()
			trips = max(trips, n)
			mu.Unlock()
		})
	}
	wg.Wait()
	return trips
}

// replicatedBatch keeps of claimed the items whose claims enough replicas acknowledged. The
// others are answered Unavailable and their claims released in one more round trip (added to
// trips); unguarded items (fail open) are kept as they are.
func (g *Guard) replicatedBatch(ctx context.Context, b []batchItem, claimed []int, waits []*redis.IntCmd, outs []Outcome, errs []error) ([]int, int) {
	var kept, short []int
	for _, i := range claimed {
		if b[i].unguarded || g.shortfall(waits[i]) == nil {
			kept = append(kept, i)
			continue
		}
		short = append(short, i)
	}
	if len(short) == 0 {
		return kept, 0
	}
	sctx := g.storeContext(ctx, earliestStoreEnd(b, short))
	defer endStore(sctx)
	trips := g.pipelined(sctx, b, short, func(p redis.Pipeliner, c *batchItem) *redis.Cmd {
		// The source, not the SHA: this rare path cannot tell whether this node compiled it.
		return releaseScript.Eval(sctx, p, []string{c.rk}, c.owner())
	})
	for _, i := range short {
		n, err := b[i].reply.Int64()
		outs[i].Kind = Unavailable
		errs[i] = unreleased(g.shortfall(waits[i]), n, err)
	}
	return kept, trips
}
