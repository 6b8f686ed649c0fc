package idem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Item is one call of a batch: the key, the payload's fingerprint and the work, as Do takes them.
type Item struct {
	Key         Key
	Fingerprint Fingerprint
	Work        Work
	// Order, when its Object is set, orders the item among the events of its object as
	// DoOrdered does. The zero Order: not ordered.
	Order Order
}

// A large batch goes to the store in parts, so that no command holds Redis for long and no reply
// outlasts the client's read timeout (go-redis gives a whole pipeline's replies one deadline).
const (
	// pipelineKeys is the most keys of one pipeline: 500 claims are about 75 KB sent and take
	// Redis 1 to 2 ms on a loaded 2-core VM, which it reads in slices of 16 KB (about 130
	// claims), other clients' commands running in between. A batch of up to 500 new keys costs
	// 2 round trips on one node.
	pipelineKeys = 500
	// scriptKeys is the most keys of one call of the finish script. A script runs atomically:
	// nothing else runs on the node until it returns. A hundred keys took it 0.7 to 1.3 ms on a
	// loaded 2-core VM (measured with a GET and a SET from Lua per key; one MGET now reads them
	// all), where one call for a standard queue's largest batch, 10,000 keys, would hold the
	// node for 50 ms or more. The calls of one pipeline run one after another, other clients'
	// commands can run between them.
	scriptKeys = 100
)

// batchItem is one item's passage through DoBatch.
type batchItem struct {
	call
	reply     *redis.Cmd   // the claim's reply, or the GET's after a refused claim
	res       Result       // the work's result
	werr      error        // the work's error; nil once it succeeded
	state     atomic.Int32 // 1 claimed, 2 started, 3 the batch's run returned
	unguarded bool         // claimed without the store (fail open)
	n         int64        // the finish script's reply for the key
	ferr      error        // the finish call's error
	unacked   error        // WithMinReplicas: why too few replicas acknowledged the result

	// On a *redis.Client the claim's reply is read raw (claimBatchRaw): raw is then set, and
	// stored and claimErr hold the reply as claimReply gives it.
	raw      *redis.RawCmd
	stored   []byte
	claimErr error
}

// errNotRun is the failure of a claimed item whose work the batch's run function never called.
var errNotRun = errors.New("idem: the batch did not run this item")

// DoBatch does for every item what Do does for one, with the same per-key semantics (owner
// token, fingerprint, replay, in progress, mismatch, release after a failure), but with the round
// trips of the whole batch shared: every claim goes out in one pipelined round trip, and every
// completion and release in one more. On a client of one node (*redis.Client) the completions
// and releases are calls of the finish script for up to 100 keys each; on other clients, whose
// keys hash to different slots and nodes, there is one call per key, and a pipeline costs one
// round trip per node that holds a key of the batch, the nodes being asked in parallel. A batch
// of up to 500 new keys therefore costs 2 round trips; a batch of replays 1. A larger batch goes
// in pipelines of 500 keys, one after another: 2 round trips per 500 new keys.
//
// The works of the items claimed run through run. It is given the indexes of those items in
// ascending order and a function work that runs item i's work and returns its error (nil when
// it succeeded). run may call work concurrently, and must return only after every call it made
// returned. An index it leaves uncalled counts as failed: its claim is released and nothing is
// stored. work(i) for an index not given runs nothing and returns nil when the item was answered
// by a replay (or was Superseded), an error otherwise (in progress, mismatch, ...), so that a run that keeps items
// in order can tell whether an earlier item it was not given succeeded; a second call of work(i)
// runs nothing and returns an error. A nil run calls every work in order, one after another.
//
// An item with an Order is ordered among the events of its object as DoOrdered orders it
// (Superseded, or InProgress while another event of the object runs, a second item of one object
// in the batch among them), in the same two round trips: a batch with ordered items sends every
// item's claim, completion and release as a call of its own. A guard built WithFencing or
// WithMinReplicas answers such a batch Unavailable, every item of it.
//
// The same key may appear twice in a batch: the first claims it, the second finds it in
// progress. DoBatch returns one Outcome and one error per item, in the order of items, as Do
// would; Outcome.RoundTrips is the number of round trips of the whole batch (0 for an item
// answered without the store: an invalid key, a replay from the local cache).
func (g *Guard) DoBatch(ctx context.Context, items []Item, run func(claimed []int, work func(i int) error)) ([]Outcome, []error) {
	if hasOrdered(items) {
		return g.doBatchOrdered(ctx, items, run) // ordered_batch.go
	}
	outs := make([]Outcome, len(items))
	errs := make([]error, len(items))
	b := make([]batchItem, len(items))
	sent := g.startBatch(ctx, items, b, outs, errs)
	if len(sent) == 0 {
		return outs, errs
	}
	admitted, err := g.admitEviction(ctx)
	if err != nil {
		for _, i := range sent {
			outs[i], errs[i] = admitted, err
		}
		return outs, errs
	}

	// Claim every key.
	waits, trips := g.claimBatch(ctx, b, sent)
	claimedAt := g.opts.now()
	for _, i := range sent {
		b[i].storeEnd = claimedAt.Add(b[i].lockTTL)
	}
	trips += admitted.RoundTrips
	full, claimed := g.claimedBatch(b, sent, outs, errs)
	if len(full) > 0 {
		trips += g.observeFullBatch(ctx, b, full, outs, errs)
	}
	if waits != nil {
		var more int
		claimed, more = g.replicatedBatch(ctx, b, claimed, waits, outs, errs)
		trips += more
	}

	// Run the works of the claimed items.
	if len(claimed) > 0 {
		g.runBatch(ctx, items, b, claimed, outs, errs, run)
	}

	// Store every result and release every failed claim.
	trips += g.finishBatch(ctx, b, claimed, outs, errs)
	for _, i := range sent {
		outs[i].RoundTrips = trips
		g.notify(&b[i].call, outs[i], errs[i])
	}
	return outs, errs
}

// startBatch starts the call of every item, answering in outs and errs those it settles without
// the store (an invalid key, a replay from the local cache), and returns the indexes of the
// others, whose claims go to the store.
func (g *Guard) startBatch(ctx context.Context, items []Item, b []batchItem, outs []Outcome, errs []error) []int {
	// One start time for the batch: every claim, sent after it, expires at the same bound, and
	// every work has the same deadline.
	now := g.opts.now()
	var sent []int
	for i, it := range items {
		var ok bool
		if outs[i], ok, errs[i] = g.start(&b[i].call, it.Key, it.Fingerprint, now); !ok {
			continue
		}
		b[i].deadlines(ctx, g.opts)
		sent = append(sent, i)
	}
	return sent
}

// claimBatch sends the claims of the items of sent, the way the guard's options say, leaving
// each reply in the item's reply. It returns each item's WAIT under WithMinReplicas (nil
// otherwise) and the round trips it took.
func (g *Guard) claimBatch(ctx context.Context, b []batchItem, sent []int) ([]*redis.IntCmd, int) {
	if g.opts.fencing {
		return nil, g.claimBatchFenced(ctx, b, sent)
	}
	var px any = b[sent[0]].lockTTL.Milliseconds() // the same for all: boxed once
	if g.opts.minReplicas > 0 {
		return g.claimBatchReplicated(ctx, b, sent, px)
	}
	if rc, ok := g.client.(*redis.Client); ok {
		return nil, g.claimBatchRaw(ctx, rc, b, sent, px)
	}
	return nil, g.pipelined(ctx, b, sent, func(p redis.Pipeliner, c *batchItem) *redis.Cmd {
		return p.Do(ctx, claimArgs(&c.call, px)...)
	})
}

// claimBatchRaw is claimBatch on a standalone client: the claims' replies are read raw, as Do's
// is (sendRawClaim), each item's left in its stored and claimErr. The claims whose replies were
// error replies, or replies a claim never gets, are sent again as typed commands in one more
// pipeline, their replies then in the items' reply, for go-redis to classify and retry as it does
// any command's. It returns the round trips it took.
func (g *Guard) claimBatchRaw(ctx context.Context, rc *redis.Client, b []batchItem, sent []int, px any) int {
	trips := 0
	for part := range slices.Chunk(sent, pipelineKeys) {
		pipe := rc.Pipeline()
		for _, i := range part {
			b[i].raw = redis.NewRawCmd(ctx, claimArgs(&b[i].call, px)...)
			_ = pipe.Process(ctx, b[i].raw) // queued: it cannot fail
		}
		_, _ = pipe.Exec(ctx) // each reply carries its own error
		trips++
	}
	var again []int
	for _, i := range sent {
		c := &b[i]
		raw, err := c.raw.Result()
		if err != nil {
			c.claimErr = err // no reply: the connection's error, already retried by go-redis
			continue
		}
		stored, free, ok := parseBulkReply(raw)
		switch {
		case !ok:
			c.raw = nil
			again = append(again, i)
		case free:
			c.claimErr = redis.Nil
		default:
			c.stored = stored
		}
	}
	if len(again) > 0 {
		trips += g.pipelined(ctx, b, again, func(p redis.Pipeliner, c *batchItem) *redis.Cmd {
			return p.Do(ctx, c.argv[:]...)
		})
	}
	return trips
}

// claimedBatch reads the claim replies of the items of sent: it answers in outs and errs those
// someone else holds or completed, and returns the items a full Redis refused, to be read again,
// and the items claimed (unguarded ones included, when the guard fails open).
func (g *Guard) claimedBatch(b []batchItem, sent []int, outs []Outcome, errs []error) (full, claimed []int) {
	for _, i := range sent {
		c := &b[i]
		stored, err := g.claimReply(c)
		switch {
		case err == nil || errors.Is(err, redis.Nil): // a record, or a free key
		case isOOM(err):
			full = append(full, i)
			continue
		case g.opts.failOpen:
			c.unguarded = true
			claimed = append(claimed, i)
			continue
		}
		var ok bool
		if outs[i], ok, errs[i] = g.claimed(&c.call, outs[i], stored, err); ok {
			claimed = append(claimed, i)
		}
	}
	return full, claimed
}

// observeFullBatch answers the items of full, whose claims a full Redis refused (it refuses
// every SET), from their records, read as Do does in one more round trip. It returns the round
// trips it took.
func (g *Guard) observeFullBatch(ctx context.Context, b []batchItem, full []int, outs []Outcome, errs []error) int {
	trips := g.pipelined(ctx, b, full, func(p redis.Pipeliner, c *batchItem) *redis.Cmd {
		return p.Do(ctx, "get", c.rk)
	})
	for _, i := range full {
		stored, err := b[i].reply.Text()
		outs[i], errs[i] = g.observeFull(&b[i].call, outs[i], stored, err)
	}
	return trips
}

// finishBatch stores the result of every claimed item whose work succeeded and releases the
// claim of every other, answering each in outs and errs, and returns the round trips it took.
// An unguarded item has nothing in the store: only a work the run never called changes its
// outcome.
func (g *Guard) finishBatch(ctx context.Context, b []batchItem, claimed []int, outs []Outcome, errs []error) int {
	finish := guardedItems(b, claimed, outs, errs)
	if len(finish) == 0 {
		return 0
	}
	sctx := g.storeContext(ctx, earliestStoreEnd(b, finish))
	defer endStore(sctx)
	trips := g.finish(sctx, b, finish)
	for _, i := range finish {
		c := &b[i]
		if c.werr != nil {
			outs[i], errs[i] = released(outs[i], c.werr, c.n, c.ferr)
		} else {
			outs[i], errs[i] = g.completedDurably(&c.call, outs[i], c.res, c.n, c.unacked, c.ferr)
		}
	}
	return trips
}

// guardedItems returns the items of claimed that hold a claim in the store, to be finished there.
// An unguarded item (fail open) has nothing in the store: only a work the run never called
// changes its outcome, to Failed.
func guardedItems(b []batchItem, claimed []int, outs []Outcome, errs []error) []int {
	var finish []int
	for _, i := range claimed {
		if c := &b[i]; c.unguarded {
			if c.werr == errNotRun {
				outs[i], errs[i] = Outcome{Kind: Failed}, errNotRun
			}
			continue
		}
		finish = append(finish, i)
	}
	return finish
}

// runBatch runs the works of the claimed items through run, leaving each one's result and error
// in b (and the outcome of an unguarded one in outs and errs).
//
//cyclo:the work function's checks of an index (answered, unclaimed, unguarded, own deadline), each one branch
func (g *Guard) runBatch(ctx context.Context, items []Item, b []batchItem, claimed []int, outs []Outcome, errs []error, run func([]int, func(int) error)) {
	for _, i := range claimed {
		b[i].state.Store(1)
		b[i].werr = errNotRun
	}
	// The claims share their start time and lock TTL, hence their work deadline: one timer. With
	// fencing each work has its own context, for its own token.
	var deadline workDeadline
	newWorkDeadline(ctx, b[claimed[0]].workDeadline, &deadline)
	defer deadline.release()
	wctx := &workContext{d: &deadline}
	work := func(i int) error {
		if i >= 0 && i < len(items) && b[i].state.Load() == 0 {
			// Answered at the claim, before run: its outcome is settled and not written again.
			if outs[i].Kind == Replayed || outs[i].Kind == Superseded {
				return nil
			}
			return fmt.Errorf("idem: batch item %d was not claimed (%s): %w", i, outs[i].Kind, errs[i])
		}
		if i < 0 || i >= len(items) || !b[i].state.CompareAndSwap(1, 2) {
			return fmt.Errorf("idem: batch item %d was not claimed, or already ran", i)
		}
		c := &b[i]
		if c.unguarded {
			out, err := g.runUnguarded(ctx, items[i].Work)
			outs[i], errs[i], c.werr = out, err, err
			return err
		}
		var ictx context.Context = wctx
		switch {
		case c.workDeadline.Before(deadline.at):
			// A claim of an earlier call whose reply was lost: it expires sooner.
			own := newWorkContext(ctx, c.workDeadline, &c.call, g.opts.fencing)
			defer own.release()
			ictx = own
		case g.opts.fencing:
			ictx = &workContext{d: &deadline, fence: c.fence, fenced: true}
		}
		c.res, c.werr = g.runIn(ictx, &c.call, items[i].Work)
		return c.werr
	}
	if run == nil {
		for _, i := range claimed {
			_ = work(i)
		}
	} else {
		run(slices.Clone(claimed), work)
	}
	for _, i := range claimed {
		b[i].state.Store(3) // a call of work after run returned runs nothing
	}
}

// pipelined sends add's command for every item of idx, in pipelines of at most pipelineKeys
// commands, leaves each item's reply in its reply, and returns the round trips it took.
func (g *Guard) pipelined(ctx context.Context, b []batchItem, idx []int, add func(redis.Pipeliner, *batchItem) *redis.Cmd) int {
	trips := 0
	for part := range slices.Chunk(idx, pipelineKeys) {
		pipe := g.client.Pipeline()
		for _, i := range part {
			b[i].reply = add(pipe, &b[i])
		}
		_, _ = pipe.Exec(ctx) // each reply carries its own error
		trips++
	}
	return trips
}

// finish completes or releases every item of finish with calls of the finish script: up to
// scriptKeys keys per call on a client of one node, one key per call on others (a multi-key
// script needs all its keys in one slot, and the keys of a batch hash to different slots). The
// calls go in pipelines of at most pipelineKeys keys, and those a server answered NOSCRIPT (a
// failover, SCRIPT FLUSH, a cluster node that never ran the script) once more with the script's
// source. It leaves each item's reply, as complete.lua or release.lua would give it, in its n
// and ferr, and returns the round trips it took. With WithMinReplicas see finishReplicated.
func (g *Guard) finish(ctx context.Context, b []batchItem, finish []int) int {
	per := 1
	if _, single := g.client.(*redis.Client); single {
		per = scriptKeys
	}
	if g.opts.minReplicas > 0 {
		return g.finishReplicated(ctx, b, finish, per)
	}
	calls := slices.Collect(slices.Chunk(finish, per))
	cmds, _, trips := g.finishCalls(ctx, b, calls, per, g.client.Pipeline, false)
	settleFinish(b, calls, cmds)
	return trips
}

// finishCalls sends the finish script's calls (calls[j] holds the items of call j, up to per
// keys) in pipelines made by newPipe, each ending with a WAIT when waited, and the calls a
// server answered NOSCRIPT once more by source. It returns each call's reply, the WAIT that
// followed it (nil without waited) and the round trips it took.
func (g *Guard) finishCalls(ctx context.Context, b []batchItem, calls [][]int, per int, newPipe func() redis.Pipeliner, waited bool) ([]*redis.Cmd, []*redis.IntCmd, int) {
	cmds := make([]*redis.Cmd, len(calls))
	var waits []*redis.IntCmd
	if waited {
		waits = make([]*redis.IntCmd, len(calls))
	}
	ttl := g.opts.resultTTL.Milliseconds()
	trips := 0
	send := func(idx []int, bySource bool) {
		for part := range slices.Chunk(idx, pipelineKeys/per) {
			pipe := newPipe()
			for _, j := range part {
				keys, args := finishArgs(b, calls[j], ttl)
				if bySource || !g.scripts.known(finishScript) {
					cmds[j] = finishScript.Eval(ctx, pipe, keys, args...)
				} else {
					cmds[j] = finishScript.EvalSha(ctx, pipe, keys, args...)
				}
			}
			var wait *redis.IntCmd
			if waited {
				wait = g.waitCmd(ctx, pipe) // covers every call of the pipeline
			}
			_, _ = pipe.Exec(ctx)
			trips++
			for _, j := range part {
				if waited {
					waits[j] = wait
				}
				if cmds[j].Args()[0] == "eval" {
					g.scripts.learn(finishScript, cmds[j].Err())
				}
			}
		}
	}
	all := make([]int, len(calls))
	for j := range all {
		all[j] = j
	}
	send(all, false)
	if again := noScript(cmds); len(again) > 0 {
		send(again, true)
	}
	return cmds, waits, trips
}

// finishReplicated is finish with WithMinReplicas: the calls go to the primary of their keys,
// grouped by node (the nodes asked in parallel), each pipeline ending with one WAIT, and an item
// whose result too few replicas acknowledged has the shortfall in its unacked: its outcome is
// NotStored, as Do's would be (a release is not waited for: a claim a failover brings back
// expires at its TTL). As Do does, the completions of a group that too few replicas acknowledged
// are sent again with their WAIT, up to completionResends more times, while the next WAIT would
// end before the earliest sendsEnd of the items sent (see completionResends).
func (g *Guard) finishReplicated(ctx context.Context, b []batchItem, finish []int, per int) int {
	return g.onPrimaries(ctx, b, finish, func(i int, err error) { b[i].ferr = err },
		func(newPipe func() redis.Pipeliner, group []int) int {
			calls := slices.Collect(slices.Chunk(group, per))
			cmds, waits, n := g.finishCalls(ctx, b, calls, per, newPipe, true)
			settleFinish(b, calls, cmds)
			var again []int // stored by us, too few replicas acknowledged
			for j, part := range calls {
				for _, i := range part {
					if c := &b[i]; c.werr == nil {
						c.unacked = g.resultShortfall(waits[j])
						if c.unacked != nil && c.ferr == nil && storedByUs(c.n) {
							again = append(again, i)
						}
					}
				}
			}
			for range completionResends {
				if len(again) == 0 || !g.opts.now().Add(g.opts.replicaTimeout).Before(earliestSendsEnd(b, again)) {
					break
				}
				calls := slices.Collect(slices.Chunk(again, per))
				cmds, waits, more := g.finishCalls(ctx, b, calls, per, newPipe, true)
				n += more
				again = again[:0]
				for j, part := range calls {
					ns, err := finishReplies(cmds[j], len(part))
					for k, i := range part {
						if err != nil || !storedByUs(ns[k]) {
							continue // the result was stored once: what the primary first answered stands
						}
						if b[i].unacked = g.resultShortfall(waits[j]); b[i].unacked != nil {
							again = append(again, i)
						}
					}
				}
			}
			return n
		})
}

// earliestSendsEnd returns the earliest sendsEnd of the items of idx.
func earliestSendsEnd(b []batchItem, idx []int) time.Time {
	end := b[idx[0]].sendsEnd
	for _, i := range idx[1:] {
		end = minTime(end, b[i].sendsEnd)
	}
	return end
}

// earliestStoreEnd returns the earliest storeEnd of the items of idx: the deadline of a store
// call that covers them all.
func earliestStoreEnd(b []batchItem, idx []int) time.Time {
	end := b[idx[0]].storeEnd
	for _, i := range idx[1:] {
		end = minTime(end, b[i].storeEnd)
	}
	return end
}

// noScript returns the indexes of the commands a server answered NOSCRIPT.
func noScript(cmds []*redis.Cmd) []int {
	var again []int
	for j, cmd := range cmds {
		if err := cmd.Err(); err != nil && isNoScript(err) {
			again = append(again, j)
		}
	}
	return again
}

// settleFinish leaves in each item's n and ferr its part of the reply of the finish script's
// call for its key: calls[j] holds the items of cmds[j].
func settleFinish(b []batchItem, calls [][]int, cmds []*redis.Cmd) {
	for j, part := range calls {
		ns, err := finishReplies(cmds[j], len(part))
		for k, i := range part {
			if err != nil {
				b[i].ferr = err
			} else {
				b[i].n = ns[k]
			}
		}
	}
}

// finishReplies returns the per-key replies of one call of the finish script for keys keys.
func finishReplies(cmd *redis.Cmd, keys int) ([]int64, error) {
	ns, err := cmd.Int64Slice()
	if err == nil && len(ns) != keys {
		err = fmt.Errorf("idem: finish script: %d replies for %d keys", len(ns), keys)
	}
	return ns, err
}

// finishArgs returns the keys and arguments of one call of the finish script for the items of
// part: the result TTL, the owner prefixes in one string, and per key the completed record, or
// nothing to release the claim of an item whose work failed.
func finishArgs(b []batchItem, part []int, ttl int64) ([]string, []any) {
	keys := make([]string, len(part))
	owners := make([]byte, 0, ownerPrefixSize*len(part))
	args := make([]any, 2, 2+len(part))
	for k, i := range part {
		c := &b[i]
		keys[k] = c.rk
		owners = append(owners, c.owner()...)
		var rec []byte // empty: release the claim
		if c.werr == nil {
			rec = c.result
		}
		args = append(args, rec)
	}
	args[0], args[1] = ttl, owners
	return keys, args
}
