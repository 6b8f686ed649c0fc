package idem

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Item is one call of a batch: the key, the payload's fingerprint and the work, as Do takes them.
type Item struct {
	Key         Key
	Fingerprint Fingerprint
	Work        Work
}

// errNotRun is the failure of a claimed item whose work the batch's run function never called.
var errNotRun = errors.New("idem: the batch did not run this item")

// DoBatch does for every item what Do does for one, with the same per-key semantics (owner
// token, fingerprint, replay, in progress, mismatch, release after a failure), but with the round
// trips of the whole batch shared: every claim goes out in one pipelined round trip, and every
// completion and release in one more. On a client of one node (*redis.Client) that one more is a
// single call of the finish script for all the batch's keys; on other clients, whose keys hash to
// different slots and nodes, it is a pipeline of one script call per key, which on a cluster costs
// one round trip per node that holds a key of the batch, the nodes being asked in parallel. A
// batch of new keys therefore costs 2 round trips whatever its size; a batch of replays 1.
//
// The works of the items claimed run through run. It is given the indexes of those items in
// ascending order and a function work that runs item i's work and returns its error (nil when
// it succeeded). run may call work concurrently, and must return only after every call it made
// returned. An index it leaves uncalled counts as failed: its claim is released and nothing is
// stored. work(i) for an index not given runs nothing and returns nil when the item was answered
// by a replay, an error otherwise (in progress, mismatch, ...), so that a run that keeps items
// in order can tell whether an earlier item it was not given succeeded; a second call of work(i)
// runs nothing and returns an error. A nil run calls every work in order, one after another.
//
// The same key may appear twice in a batch: the first claims it, the second finds it in
// progress. DoBatch returns one Outcome and one error per item, in the order of items, as Do
// would; Outcome.RoundTrips is the number of round trips of the whole batch (0 for an item
// answered without the store: an invalid key, a replay from the local cache).
func (g *Guard) DoBatch(ctx context.Context, items []Item, run func(claimed []int, work func(i int) error)) ([]Outcome, []error) {
	outs := make([]Outcome, len(items))
	errs := make([]error, len(items))
	calls := make([]call, len(items))
	var sent []int // items whose claim goes to the store
	for i, it := range items {
		var ok bool
		if outs[i], ok, errs[i] = g.start(&calls[i], it.Key, it.Fingerprint); !ok {
			continue
		}
		calls[i].deadlines(ctx, g.opts)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return outs, errs
	}

	// Claim every key in one round trip.
	trips := 1
	replies := make([]*redis.Cmd, len(items))
	pipe := g.client.Pipeline()
	for _, i := range sent {
		replies[i] = pipe.Do(ctx, claimArgs(&calls[i])...)
	}
	_, _ = pipe.Exec(ctx) // each reply carries its own error
	var full, claimed, unguarded []int
	for _, i := range sent {
		stored, err := replies[i].Text()
		switch {
		case isOOM(err):
			full = append(full, i)
			continue
		case err != nil && !errors.Is(err, redis.Nil) && g.opts.failOpen:
			unguarded = append(unguarded, i)
			claimed = append(claimed, i)
			continue
		}
		var ok bool
		if outs[i], ok, errs[i] = g.claimed(&calls[i], outs[i], stored, err); ok {
			claimed = append(claimed, i)
		}
	}
	if len(full) > 0 {
		// A full Redis refuses every SET: read those records, as Do does, in one more round trip.
		trips++
		pipe := g.client.Pipeline()
		for _, i := range full {
			replies[i] = pipe.Do(ctx, "get", calls[i].rk)
		}
		_, _ = pipe.Exec(ctx)
		for _, i := range full {
			stored, err := replies[i].Text()
			outs[i], errs[i] = g.observeFull(&calls[i], outs[i], stored, err)
		}
	}

	// Run the works of the claimed items.
	results := make([]Result, len(items))
	werrs := make([]error, len(items))
	state := make([]atomic.Int32, len(items)) // 1 claimed, 2 started
	for _, i := range claimed {
		state[i].Store(1)
		werrs[i] = errNotRun
	}
	isUnguarded := make([]bool, len(items))
	for _, i := range unguarded {
		isUnguarded[i] = true
	}
	work := func(i int) error {
		if i >= 0 && i < len(items) && state[i].Load() == 0 {
			// Answered at the claim, before run: its outcome is settled and not written again.
			if outs[i].Kind == Replayed {
				return nil
			}
			return fmt.Errorf("idem: batch item %d was not claimed (%s): %w", i, outs[i].Kind, errs[i])
		}
		if i < 0 || i >= len(items) || !state[i].CompareAndSwap(1, 2) {
			return fmt.Errorf("idem: batch item %d was not claimed, or already ran", i)
		}
		if isUnguarded[i] {
			out, err := g.runUnguarded(ctx, items[i].Work)
			outs[i], errs[i], werrs[i] = out, err, err
			return err
		}
		results[i], werrs[i] = g.run(ctx, &calls[i], items[i].Work)
		return werrs[i]
	}
	if run == nil {
		run = func(claimed []int, work func(int) error) {
			for _, i := range claimed {
				_ = work(i)
			}
		}
	}
	if len(claimed) > 0 {
		run(append([]int(nil), claimed...), work)
	}
	for _, i := range claimed {
		state[i].Store(3) // a call of work after run returned runs nothing
	}

	// Store every result and release every failed claim in one round trip.
	var finish []int
	for _, i := range claimed {
		if isUnguarded[i] {
			if werrs[i] == errNotRun {
				outs[i], errs[i] = Outcome{Kind: Failed}, errNotRun
			}
			continue
		}
		finish = append(finish, i)
	}
	ns := make([]int64, len(items))
	ferrs := make([]error, len(items))
	if len(finish) > 0 {
		if _, single := g.client.(*redis.Client); single {
			trips += g.finishOnOneNode(storeContext(ctx), calls, finish, werrs, ns, ferrs)
		} else {
			trips += g.finishBatch(storeContext(ctx), calls, finish, werrs, replies)
			for _, i := range finish {
				ns[i], ferrs[i] = replies[i].Int64()
			}
		}
	}
	for _, i := range finish {
		n, err := ns[i], ferrs[i]
		if werrs[i] != nil {
			outs[i], errs[i] = released(outs[i], werrs[i], n, err)
		} else {
			outs[i], errs[i] = g.completed(&calls[i], outs[i], results[i], n, err)
		}
	}
	for _, i := range sent {
		outs[i].RoundTrips = trips
	}
	return outs, errs
}

// finishOnOneNode completes or releases every item of finish with one call of the finish script,
// on a client that talks to one node: 1 round trip, 2 after NOSCRIPT. It leaves each item's
// reply, as complete.lua or release.lua would give it, in ns and errs, and returns the round
// trips it took. A cluster cannot take it: a multi-key script needs all its keys in one slot,
// and the keys of a batch hash to different slots.
func (g *Guard) finishOnOneNode(ctx context.Context, calls []call, finish []int, werrs []error, ns []int64, errs []error) int {
	keys := make([]string, len(finish))
	args := make([]any, 1, 1+2*len(finish))
	args[0] = g.opts.resultTTL.Milliseconds()
	for j, i := range finish {
		c := &calls[i]
		keys[j] = c.rk
		var rec []byte // empty: release the claim
		if werrs[i] == nil {
			rec = c.result
		}
		args = append(args, c.owner(), rec)
	}
	cmd, trips := g.scripts.call(ctx, finishScript, keys, args...)
	replies, err := cmd.Int64Slice()
	if err == nil && len(replies) != len(finish) {
		err = fmt.Errorf("idem: finish script: %d replies for %d keys", len(replies), len(finish))
	}
	for j, i := range finish {
		if err != nil {
			errs[i] = err
			continue
		}
		ns[i] = replies[j]
	}
	return trips
}

// finishBatch sends the complete script for every item of finish whose work succeeded and the
// release script for the others, in one pipeline, and a second one with the scripts' source for
// the commands a server answered NOSCRIPT (a failover, SCRIPT FLUSH, a cluster node that never
// ran the script). It leaves each reply in replies and returns the round trips it took.
func (g *Guard) finishBatch(ctx context.Context, calls []call, finish []int, werrs []error, replies []*redis.Cmd) int {
	send := func(indexes []int, bySource bool) {
		pipe := g.client.Pipeline()
		for _, i := range indexes {
			c := &calls[i]
			s, args := completeScript, []any{c.owner(), c.result, g.opts.resultTTL.Milliseconds()}
			if werrs[i] != nil {
				s, args = releaseScript, []any{c.owner()}
			}
			if bySource || !g.scripts.known(s) {
				replies[i] = s.Eval(ctx, pipe, []string{c.rk}, args...)
			} else {
				replies[i] = s.EvalSha(ctx, pipe, []string{c.rk}, args...)
			}
		}
		_, _ = pipe.Exec(ctx)
		for _, i := range indexes {
			if args := replies[i].Args(); args[0] == "eval" {
				s := completeScript
				if werrs[i] != nil {
					s = releaseScript
				}
				g.scripts.learn(s, replies[i].Err())
			}
		}
	}
	send(finish, false)
	var again []int
	for _, i := range finish {
		if err := replies[i].Err(); err != nil && isNoScript(err) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return 1
	}
	send(again, true)
	return 2
}
