package idem

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis client the guard uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all satisfy it.
type Client interface {
	redis.Scripter
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// Guard runs work at most once per key. Build one per execution environment, at init, and
// share it: it is safe for concurrent use and holds no connection of its own.
type Guard struct {
	client    Client
	scripts   *scriptRunner
	completer *completer
	opts      options
	cache     *lru.Cache[string, cachedResult]
}

type cachedResult struct {
	fingerprint Fingerprint
	result      Result
	expiresAt   time.Time
}

// Work is the unit of work guarded by a key. Its context ends before the claim can expire.
type Work func(ctx context.Context) (Result, error)

// New returns a Guard on client. It sends nothing to the store: the first command goes out
// with the first call to Do. Invalid options are an error.
func New(client Client, opts ...Option) (*Guard, error) {
	if client == nil {
		return nil, errors.New("idem: nil client")
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	scripts := &scriptRunner{client: client}
	scripts.plain.Store(o.plainScripts)
	g := &Guard{client: client, scripts: scripts, completer: &completer{client: client, scripts: scripts}, opts: o}
	if o.condSet {
		g.completer.mode.Store(completeBySet)
	}
	if o.cacheSize > 0 && o.cacheTTL > 0 {
		c, err := lru.New[string, cachedResult](o.cacheSize)
		if err != nil {
			return nil, fmt.Errorf("idem: local cache: %w", err)
		}
		g.cache = c
	}
	return g, nil
}

// Do runs work once for key, or reports why it did not:
//
//   - a new key is claimed, work runs with a context that ends at
//     min(ctx deadline, claim time + lock TTL) - safety margin, and its result is stored for the
//     result TTL (Executed);
//   - a completed key returns the stored result without running work (Replayed);
//   - a key claimed by another owner (InProgress), or used with another fingerprint (Mismatch),
//     returns at once;
//   - if work fails (error, panic, context ended) the claim is released and nothing is stored
//     (Failed), so the next delivery runs it again;
//   - if the store is unreachable nothing runs (Unavailable), unless WithFailOpen is set.
//
// The error is nil for Executed, Replayed and ExecutedUnguarded, and otherwise wraps one of the
// package's sentinels. Executed with a non-nil error means the work ran but its result could not
// be stored (ErrUnavailable); LockLost means it ran but the claim was no longer ours.
func (g *Guard) Do(ctx context.Context, key Key, fp Fingerprint, work Work) (Outcome, error) {
	if err := key.Validate(); err != nil {
		return Outcome{Kind: InvalidKey}, err
	}
	rk := key.redisKey(g.opts.prefix)
	now := g.opts.now()
	if out, ok := g.fromCache(rk, fp, now); ok {
		return out, outcomeErr(out.Kind)
	}

	lockTTL, workDeadline := g.deadlines(ctx, now)
	var tok token
	_, _ = rand.Read(tok[:]) // never fails since Go 1.24
	claim := encodeInProgress(tok, fp, now.Add(lockTTL))
	stored, err := g.client.Do(ctx, "set", rk, claim, "px", lockTTL.Milliseconds(), "nx", "get").Text()
	out := Outcome{RoundTrips: 1}
	switch {
	case errors.Is(err, redis.Nil):
		// Claimed: the key was free.
	case err != nil && redis.HasErrorPrefix(err, "OOM"):
		// A full Redis (noeviction) refuses every SET, even one that would change nothing:
		// read the record so replays and in-progress answers still work; a new key stays refused.
		out.RoundTrips++
		if stored, gerr := g.client.Do(ctx, "get", rk).Text(); gerr == nil {
			if rec, derr := decodeRecord([]byte(stored)); derr == nil {
				return g.observe(out, rk, fp, rec, now)
			}
		}
		out.Kind = Unavailable
		return out, &StoreError{Op: "claim", Err: err}
	case err != nil:
		if g.opts.failOpen {
			return g.runUnguarded(ctx, now, work)
		}
		out.Kind = Unavailable
		return out, &StoreError{Op: "claim", Err: err}
	default:
		rec, err := decodeRecord([]byte(stored))
		if err != nil {
			out.Kind = Unavailable
			return out, &StoreError{Op: "claim", Err: err}
		}
		// A claim retried after its reply was lost finds its own record: still ours.
		if rec.completed || rec.token != tok {
			return g.observe(out, rk, fp, rec, now)
		}
	}

	wctx, cancel := context.WithDeadline(ctx, workDeadline)
	res, werr := runWork(wctx, work)
	cancel()
	var enc []byte
	if werr == nil {
		enc, werr = encodeCompleted(tok, fp, g.opts.now().Add(g.opts.resultTTL), res, g.opts.maxResultSize)
	}
	sctx := storeContext(ctx)
	if werr != nil {
		out.Kind = Failed
		we := asWorkError(werr)
		n, rt, err := g.scripts.run(sctx, releaseScript, []string{rk}, claim[:ownerPrefixSize])
		out.RoundTrips += rt
		switch {
		case err != nil:
			we.ReleaseErr = &StoreError{Op: "release", Err: err}
		case n == scriptOtherOwner:
			we.ReleaseErr = &LockLostError{}
		}
		return out, we
	}

	out.Result = res
	n, rt, err := g.completer.complete(sctx, rk, claim, enc, g.opts.resultTTL.Milliseconds())
	out.RoundTrips += rt
	switch {
	case err != nil:
		out.Kind = Executed
		return out, &StoreError{Op: "complete", Err: err}
	case n == scriptDone || n == scriptAlreadyOurs:
		out.Kind = Executed
		g.remember(rk, fp, res, g.opts.now().Add(g.opts.resultTTL))
		return out, nil
	default:
		out.Kind = LockLost
		return out, &LockLostError{Expired: n == scriptGone}
	}
}

// observe turns the record found at claim time into an outcome.
func (g *Guard) observe(out Outcome, rk string, fp Fingerprint, rec record, now time.Time) (Outcome, error) {
	switch {
	case rec.fingerprint != fp:
		out.Kind = Mismatch
		return out, ErrMismatch
	case rec.completed:
		out.Kind = Replayed
		out.Result = rec.result
		g.remember(rk, fp, rec.result, rec.expiresAt)
		return out, nil
	default:
		out.Kind = InProgress
		out.RetryAfter = max(rec.expiresAt.Sub(now), 0)
		return out, &InProgressError{RetryAfter: out.RetryAfter}
	}
}

// deadlines returns the claim TTL and the work's deadline for a call starting at now.
// The claim is taken after now, so now + lockTTL is a lower bound of its expiry.
func (g *Guard) deadlines(ctx context.Context, now time.Time) (time.Duration, time.Time) {
	invocation, hasDeadline := ctx.Deadline()
	lockTTL := g.opts.lockTTL
	if lockTTL == 0 {
		lockTTL = DefaultLockTTL
		if hasDeadline {
			lockTTL = invocation.Sub(now) + g.opts.lockMargin
		}
	}
	lockTTL = max(lockTTL, time.Millisecond)
	workDeadline := now.Add(lockTTL - g.opts.safetyMargin)
	if hasDeadline {
		workDeadline = minTime(workDeadline, invocation.Add(-g.opts.safetyMargin))
	}
	return lockTTL, workDeadline
}

// storeContext is the context of the final complete or release call: it must run even when the
// caller's context is cancelled or its work deadline passed (the claim would otherwise linger
// until its TTL). It carries no deadline of its own: the client's dial and read timeouts bound
// the call (redisconn's are 1s and 500ms, within the safety margin Lambda leaves after the work's
// deadline), and creating a timer per call would cost more than the call's own client overhead.
func storeContext(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

func (g *Guard) runUnguarded(ctx context.Context, now time.Time, work Work) (Outcome, error) {
	deadline := now.Add(DefaultLockTTL)
	if d, ok := ctx.Deadline(); ok {
		deadline = d.Add(-g.opts.safetyMargin)
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	res, err := runWork(wctx, work)
	if err != nil {
		return Outcome{Kind: Failed, RoundTrips: 1}, asWorkError(err)
	}
	return Outcome{Kind: ExecutedUnguarded, Result: res, RoundTrips: 1}, nil
}

func (g *Guard) fromCache(rk string, fp Fingerprint, now time.Time) (Outcome, bool) {
	if g.cache == nil {
		return Outcome{}, false
	}
	c, ok := g.cache.Get(rk)
	if !ok {
		return Outcome{}, false
	}
	if !now.Before(c.expiresAt) {
		g.cache.Remove(rk)
		return Outcome{}, false
	}
	if c.fingerprint != fp {
		return Outcome{Kind: Mismatch, FromLocalCache: true}, true
	}
	return Outcome{Kind: Replayed, Result: c.result, FromLocalCache: true}, true
}

func (g *Guard) remember(rk string, fp Fingerprint, r Result, expiresAt time.Time) {
	if g.cache == nil {
		return
	}
	expiresAt = minTime(expiresAt, g.opts.now().Add(g.opts.cacheTTL))
	g.cache.Add(rk, cachedResult{fingerprint: fp, result: r, expiresAt: expiresAt})
}

func outcomeErr(k Kind) error {
	if k == Mismatch {
		return ErrMismatch
	}
	return nil
}

// runWork runs work, turning a panic into a *WorkError and a success that arrives after the
// context ended into a failure: the claim may already be someone else's, so it is not stored.
func runWork(ctx context.Context, work Work) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &WorkError{Err: fmt.Errorf("panic: %v", p), Panic: p, Stack: debug.Stack()}
		}
	}()
	res, err = work(ctx)
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("work finished after its deadline: %w", context.Cause(ctx))
	}
	return res, err
}

func asWorkError(err error) *WorkError {
	var we *WorkError
	if errors.As(err, &we) {
		return we
	}
	return &WorkError{Err: err}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
