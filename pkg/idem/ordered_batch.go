package idem

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// A batch with ordered items (Item.Order) goes through doBatchOrdered: the same stages as DoBatch
// (start, claim, run, finish) with the same round trips, 2 for a batch of new keys, but every
// ordered item's claim and finish is a call of its own ordered script, in the pipeline beside the
// other items' SET NX PX GET and one-key finish calls. An ordered item's keys share its object's
// slot, so each call reaches one node of a cluster; the pipeline reaches every node concerned at
// once, as DoBatch's does.

// hasOrdered reports whether any item of items is ordered.
func hasOrdered(items []Item) bool {
	return slices.ContainsFunc(items, func(it Item) bool { return it.Order.Object != "" })
}

// doBatchOrdered is DoBatch for a batch with ordered items.
//
//cyclo:the stages of DoBatch in order (start, claim, run, finish), each a short loop over the items
func (g *Guard) doBatchOrdered(ctx context.Context, items []Item, run func(claimed []int, work func(i int) error)) ([]Outcome, []error) {
	outs := make([]Outcome, len(items))
	errs := make([]error, len(items))
	if err := g.orderingSupported(); err != nil {
		for i := range items {
			outs[i], errs[i] = Outcome{Kind: Unavailable}, err
		}
		return outs, errs
	}
	b := make([]batchItem, len(items))
	ord := make([]orderedCall, len(items))
	now := g.opts.now()
	var sent []int
	for i, it := range items {
		var ok bool
		if it.Order.Object != "" {
			outs[i], ok, errs[i] = g.startOrdered(&b[i].call, &ord[i], it.Key, it.Order, it.Fingerprint, now)
		} else {
			outs[i], ok, errs[i] = g.start(&b[i].call, it.Key, it.Fingerprint, now)
		}
		if ok {
			b[i].deadlines(ctx, g.opts)
			sent = append(sent, i)
		}
	}
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

	trips := g.claimOrderedBatch(ctx, items, b, ord, sent) + admitted.RoundTrips
	claimedAt := g.opts.now()
	for _, i := range sent {
		b[i].storeEnd = claimedAt.Add(b[i].lockTTL)
	}
	full, claimed := g.claimedOrderedBatch(items, b, sent, outs, errs)
	if len(full) > 0 {
		trips += g.observeFullBatch(ctx, b, full, outs, errs)
	}
	// A claim whose reply came after the work's deadline does not run (runIn): it is released.
	if len(claimed) > 0 {
		g.runBatch(ctx, items, b, claimed, outs, errs, run)
	}
	trips += g.finishOrderedBatch(ctx, items, b, ord, claimed, outs, errs)
	for _, i := range sent {
		outs[i].RoundTrips = trips
		g.notify(&b[i].call, outs[i], errs[i])
	}
	return outs, errs
}

// scriptIn queues s with keys and args on p: by source when bySource or when the runner has not
// had a server compile it yet, by SHA otherwise.
func (g *Guard) scriptIn(ctx context.Context, p redis.Pipeliner, s *redis.Script, bySource bool, keys []string, args ...any) *redis.Cmd {
	if bySource || !g.scripts.known(s) {
		return s.Eval(ctx, p, keys, args...)
	}
	return s.EvalSha(ctx, p, keys, args...)
}

// scriptCalls sends, for the items of idx, the command add queues (each item's script is
// script(i), nil for a command that is not a script) in pipelines, then once more by source
// those a server answered NOSCRIPT, and records the scripts compiled. It returns the round trips.
func (g *Guard) scriptCalls(ctx context.Context, b []batchItem, idx []int, script func(i int) *redis.Script,
	add func(p redis.Pipeliner, i int, bySource bool) *redis.Cmd) int {
	send := func(idx []int, bySource bool) int {
		trips := 0
		for part := range slices.Chunk(idx, pipelineKeys) {
			pipe := g.client.Pipeline()
			for _, i := range part {
				b[i].reply = add(pipe, i, bySource)
			}
			_, _ = pipe.Exec(ctx) // each reply carries its own error
			trips++
		}
		for _, i := range idx {
			if s := script(i); s != nil && b[i].reply.Args()[0] == "eval" {
				g.scripts.learn(s, b[i].reply.Err())
			}
		}
		return trips
	}
	trips := send(idx, false)
	var again []int
	for _, i := range idx {
		if err := b[i].reply.Err(); script(i) != nil && err != nil && isNoScript(err) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		trips += send(again, true)
	}
	return trips
}

// claimOrderedBatch sends the claims of the items of sent: the ordered claim script for an
// ordered item, SET NX PX GET for another, leaving each reply in the item's reply. It returns
// the round trips it took.
func (g *Guard) claimOrderedBatch(ctx context.Context, items []Item, b []batchItem, ord []orderedCall, sent []int) int {
	var px any = b[sent[0]].lockTTL.Milliseconds() // the same for all: boxed once
	script := func(i int) *redis.Script {
		if items[i].Order.Object != "" {
			return claimOrderedScript
		}
		return nil
	}
	return g.scriptCalls(ctx, b, sent, script, func(p redis.Pipeliner, i int, bySource bool) *redis.Cmd {
		c := &b[i]
		if items[i].Order.Object == "" {
			return p.Do(ctx, claimArgs(&c.call, px)...)
		}
		return g.scriptIn(ctx, p, claimOrderedScript, bySource, ord[i].keys[:], g.orderedClaimArgs(&c.call, &ord[i])...)
	})
}

// claimedOrderedBatch is claimedBatch for a batch with ordered items: an ordered item whose
// object another event holds is answered InProgress.
func (g *Guard) claimedOrderedBatch(items []Item, b []batchItem, sent []int, outs []Outcome, errs []error) (full, claimed []int) {
	for _, i := range sent {
		c := &b[i]
		var stored []byte
		var err error
		if items[i].Order.Object != "" {
			var busy time.Duration
			if stored, busy, err = orderedReply(c.reply); busy > 0 {
				outs[i], errs[i] = objectBusy(outs[i], busy)
				continue
			}
		} else {
			s, rerr := c.reply.Text()
			stored, err = []byte(s), rerr
		}
		switch {
		case err == nil || errors.Is(err, redis.Nil):
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

// finishOrderedBatch is finishBatch for a batch with ordered items: each claimed item's result is
// stored, or its claim released, by a call of its own (the ordered completion or release, or the
// finish script for one key), all in one pipeline. It returns the round trips it took.
func (g *Guard) finishOrderedBatch(ctx context.Context, items []Item, b []batchItem, ord []orderedCall, claimed []int, outs []Outcome, errs []error) int {
	finish := guardedItems(b, claimed, outs, errs)
	if len(finish) == 0 {
		return 0
	}
	sctx := g.storeContext(ctx, earliestStoreEnd(b, finish))
	defer endStore(sctx)
	ttl := g.opts.resultTTL.Milliseconds()
	markTTL := g.orderTTLms()
	script := func(i int) *redis.Script {
		switch {
		case items[i].Order.Object == "":
			return finishScript
		case b[i].werr != nil:
			return releaseOrderedScript
		}
		return completeOrderedScript
	}
	trips := g.scriptCalls(sctx, b, finish, script, func(p redis.Pipeliner, i int, bySource bool) *redis.Cmd {
		c, s := &b[i], script(i)
		switch s {
		case finishScript:
			keys, args := finishArgs(b, []int{i}, ttl)
			return g.scriptIn(sctx, p, s, bySource, keys, args...)
		case releaseOrderedScript:
			return g.scriptIn(sctx, p, s, bySource, ord[i].keys[:2], c.owner())
		}
		_, args := g.completionArgs(&c.call)
		return g.scriptIn(sctx, p, s, bySource, ord[i].keys[:], args[0], args[1], args[2], ord[i].version, markTTL)
	})
	for _, i := range finish {
		c := &b[i]
		if items[i].Order.Object == "" {
			settleFinish(b, [][]int{{i}}, []*redis.Cmd{c.reply})
		} else {
			c.n, c.ferr = c.reply.Int64()
		}
		if c.werr != nil {
			outs[i], errs[i] = released(outs[i], c.werr, c.n, c.ferr)
		} else {
			outs[i], errs[i] = g.completed(&c.call, outs[i], c.res, c.n, c.ferr)
		}
	}
	return trips
}
