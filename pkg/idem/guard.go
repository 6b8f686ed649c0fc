package idem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"
	"unsafe"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/pkg/idem/internal/unencodable"
)

// Client is the part of a go-redis client the guard uses. *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all satisfy it.
type Client interface {
	redis.Scripter
	Do(ctx context.Context, args ...any) *redis.Cmd
	Pipeline() redis.Pipeliner
}

// Guard runs work at most once per key. Build one per execution environment, at init, and
// share it: it is safe for concurrent use and holds no connection of its own.
type Guard struct {
	client  Client
	scripts *scriptRunner
	opts    options
	cache   *lru.Cache[string, cachedResult]
	lost    lostClaims
	// eviction is the store's maxmemory-policy as last read (Warm, or a call under
	// WithUnsafeEviction(EvictionRefuse)).
	eviction evictionState
	// resultTTLms is the result TTL in milliseconds, boxed once for the complete script.
	resultTTLms any
	// stores ends the final store calls' contexts at their deadlines (storeContext).
	stores alarm
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
	g := &Guard{client: client, scripts: &scriptRunner{client: client}, opts: o, resultTTLms: o.resultTTL.Milliseconds()}
	if o.cacheSize > 0 && o.cacheTTL > 0 {
		c, err := lru.New[string, cachedResult](o.cacheSize)
		if err != nil {
			return nil, fmt.Errorf("idem: local cache: %w", err)
		}
		g.cache = c
	}
	return g, nil
}

// Do runs work once for key, or reports why it did not. The Outcome's Kind says which of these
// happened, and is what callers branch on:
//
//   - a new key is claimed, work runs with a context that ends at
//     min(ctx deadline, claim time + lock TTL) - 500ms (by the clock: its Err and Done report
//     the end even when its timer has not fired, after a pause of the process), carrying the
//     claim's fencing token with WithFencing (FenceFrom), and its result is stored for the
//     result TTL (Executed; LockLost or NotStored when it ran but could not be stored;
//     NotReplayable, with Outcome.Ran, when the result cannot be stored at all: a marker is kept
//     instead, and every later call of the key is NotReplayable without running work);
//   - a completed key returns the stored result without running work (Replayed);
//   - a key claimed by another owner (InProgress), or used with another fingerprint (Mismatch),
//     returns at once;
//   - if work fails (error, panic, context ended) the claim is released and nothing is stored
//     (Failed), so the next delivery runs it again;
//   - if the store is unreachable nothing runs (Unavailable), unless WithFailOpen is set
//     (ExecutedUnguarded);
//   - an invalid key is refused before any command (InvalidKey).
//
// The error is nil for Executed, Replayed and ExecutedUnguarded. For every other Kind it
// explains the outcome for the log, and matches with errors.Is the sentinel of its Kind:
// ErrInProgress, ErrMismatch, ErrUnavailable or ErrInvalidKey; for Failed it wraps the work's
// own error (LockLost and NotStored have no sentinel: the work ran, see Kind).
func (g *Guard) Do(ctx context.Context, key Key, fp Fingerprint, work Work) (Outcome, error) {
	c := &call{}
	out, err := g.do(ctx, c, key, fp, work)
	g.notify(c, out, err)
	return out, err
}

// do is Do, before the observer hears of the outcome.
func (g *Guard) do(ctx context.Context, c *call, key Key, fp Fingerprint, work Work) (Outcome, error) {
	if out, ok, err := g.start(c, key, fp, g.opts.now()); !ok {
		return out, err
	}
	out, err := g.admitEviction(ctx)
	if err != nil {
		return out, err
	}
	c.deadlines(ctx, g.opts)
	var stored []byte
	var cerr error
	var wait *redis.IntCmd // WithMinReplicas: the claim's WAIT (never with fencing, see validate)
	out.RoundTrips++
	if g.opts.fencing {
		var trips int
		var s string
		s, trips, cerr = g.claimFenced(ctx, c)
		stored = []byte(s)
		out.RoundTrips += trips - 1
	} else {
		stored, wait, cerr = g.sendClaim(ctx, c)
	}
	if isOOM(cerr) {
		out.RoundTrips++
		s, err := g.client.Do(ctx, "get", c.rk).Text()
		return g.observeFull(c, out, s, err)
	}
	if cerr != nil && !errors.Is(cerr, redis.Nil) && g.opts.failOpen {
		return g.runUnguarded(ctx, work)
	}
	if out, claimed, err := g.claimed(c, out, stored, cerr); !claimed {
		return out, err
	}
	c.storeEnd = g.opts.now().Add(c.lockTTL) // the claim's reply has just come
	if out, ok, err := g.replicated(ctx, c, out, wait); !ok {
		return out, err
	}

	res, werr := g.run(ctx, c, work)
	sctx := g.storeContext(ctx, c.storeEnd)
	defer endStore(sctx)
	if werr != nil {
		n, trips, rerr := g.scripts.run(sctx, releaseScript, []string{c.rk}, c.owner())
		out.RoundTrips += trips
		return released(out, werr, n, rerr)
	}
	n, trips, unacked, serr := g.complete(sctx, c)
	out.RoundTrips += trips
	return g.completedDurably(c, out, res, n, unacked, serr)
}

// call is one key's passage through the guard: its claim, its work's deadline, its result.
type call struct {
	key          Key
	fp           Fingerprint
	rk           string
	now          time.Time
	lockTTL      time.Duration
	workDeadline time.Time
	// storeEnd is when the claim has expired at the latest: lockTTL after the claim's reply came
	// (the SET that set its TTL ran before). The final store call ends then (storeContext).
	storeEnd time.Time
	// sendsEnd is when a completion sent again (WithMinReplicas) must have its answer: the
	// claim's expiry or the invocation's deadline, whichever comes first, less answerMargin.
	sendsEnd time.Time
	// claim is our in-progress record; result the completed record, once the work succeeded.
	claim, result []byte
	tok           token
	// fence is the claim's fencing token (WithFencing), 0 without one.
	fence uint64
	// unreplayable explains why the result of work that succeeded is not stored: result is
	// then a marker (encodeMarker).
	unreplayable error

	// The claim's and the completion's commands are built in the call, so that sending them
	// allocates neither their argument slices nor boxes for their arguments: go-redis writes a
	// *string and a *int64 as it writes a string and an int64, and a pointer is boxed in place.
	claimBuf   [headerSize]byte
	claimText  string // claim as a string: the same bytes, never written after deadlines
	ownerText  string // owner() as a string
	resultText string // result as a string, the same bytes, never written after runIn
	px         int64  // lockTTL in milliseconds, for the claim
	argv       [7]any
	keys       [1]string
	completion [3]any
}

// owner is the prefix of our records that the scripts compare: version, kind 'P', token.
func (c *call) owner() []byte { return c.claim[:ownerPrefixSize] }

// start begins c, a call for key at now, or answers it without the store (ok false: out and err
// are the answer): an invalid key, or a result in the local cache.
func (g *Guard) start(c *call, key Key, fp Fingerprint, now time.Time) (out Outcome, ok bool, err error) {
	if err := key.Validate(); err != nil {
		return Outcome{Kind: InvalidKey}, false, err
	}
	return g.begin(c, key, key.redisKey(g.opts.prefix), fp, now)
}

// begin is start for a valid key whose record is rk.
func (g *Guard) begin(c *call, key Key, rk string, fp Fingerprint, now time.Time) (out Outcome, ok bool, err error) {
	*c = call{key: key, fp: fp, rk: rk, now: now}
	if out, ok := g.fromCache(c.rk, fp, c.now); ok {
		if out.Kind == Mismatch {
			return out, false, errMismatch
		}
		return out, false, nil
	}
	if tok, ok := g.lost.take(c.rk, fp, now); ok {
		c.tok = tok // our claim may be in Redis: claiming with its token finds it
	} else {
		// A fresh owner token from the runtime's ChaCha8 generator, seeded by the system:
		// unique among claims, at a few nanoseconds where a crypto/rand read costs hundreds.
		binary.LittleEndian.PutUint64(c.tok[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(c.tok[8:], rand.Uint64())
	}
	return Outcome{}, true, nil
}

// deadlines sets the claim TTL, the claim record and the work's deadline for a call starting at
// c.now. The claim is taken after c.now, so c.now + lockTTL is a lower bound of its expiry.
func (c *call) deadlines(ctx context.Context, o options) {
	invocation, hasDeadline := ctx.Deadline()
	c.lockTTL = o.lockTTL
	if c.lockTTL == 0 {
		c.lockTTL = defaultLockTTL
		if hasDeadline {
			c.lockTTL = invocation.Sub(c.now) + lockMargin
		}
	}
	c.lockTTL = max(c.lockTTL, time.Millisecond)
	c.workDeadline = c.now.Add(c.lockTTL - safetyMargin)
	c.sendsEnd = c.now.Add(c.lockTTL - answerMargin)
	if hasDeadline {
		c.workDeadline = minTime(c.workDeadline, invocation.Add(-safetyMargin))
		c.sendsEnd = minTime(c.sendsEnd, invocation.Add(-answerMargin))
	}
	putHeader(c.claimBuf[:], kindInProgress, c.tok, c.fp, c.now.Add(c.lockTTL))
	c.claim = c.claimBuf[:]
	c.claimText = unsafe.String(&c.claimBuf[0], len(c.claimBuf))
}

// claimArgs is the claim: one SET NX PX GET that stores our in-progress record if the key is
// free and returns the record already there if not. px is c.lockTTL in milliseconds, which the
// calls of a batch share (nil: c.lockTTL's, from c.px).
func claimArgs(c *call, px any) []any {
	if px == nil {
		c.px = c.lockTTL.Milliseconds()
		px = &c.px
	}
	c.argv = [7]any{"set", &c.rk, &c.claimText, "px", px, "nx", "get"}
	return c.argv[:]
}

// completionArgs are the keys and arguments of the complete script for c, whose result is
// encoded: the owner prefix, the completed record and the result TTL in milliseconds (boxed
// once per guard).
func (g *Guard) completionArgs(c *call) ([]string, []any) {
	c.resultText = unsafe.String(unsafe.SliceData(c.result), len(c.result))
	c.ownerText = c.claimText[:ownerPrefixSize]
	c.keys[0] = c.rk
	c.completion = [3]any{&c.ownerText, &c.resultText, g.resultTTLms}
	return c.keys[:], c.completion[:]
}

// errMismatch explains a Mismatch outcome.
var errMismatch = fmt.Errorf("%w: the key was used before with a different payload", ErrMismatch)

// claimed interprets the reply to the claim: claimed when the key is ours, else the outcome.
// stored, the record already there, is the caller's: the outcome may share its memory.
func (g *Guard) claimed(c *call, out Outcome, stored []byte, err error) (_ Outcome, claimed bool, _ error) {
	switch {
	case errors.Is(err, redis.Nil):
		return out, true, nil // the key was free
	case err != nil:
		if !isReply(err) {
			g.lost.remember(c) // the claim may have taken the key
		}
		out.Kind = Unavailable
		return out, false, fmt.Errorf("%w: claim: %w", ErrUnavailable, err)
	}
	rec, err := decodeRecord(stored)
	if err != nil {
		out.Kind = Unavailable
		return out, false, fmt.Errorf("%w: claim: %w", ErrUnavailable, err)
	}
	// A claim retried after its reply was lost finds its own record: still ours.
	if !rec.completed && rec.token == c.tok {
		// Our claim, taken by an earlier call whose reply was lost: it expires when it says.
		c.fence = rec.fence
		c.workDeadline = minTime(c.workDeadline, rec.expiresAt.Add(-safetyMargin))
		c.sendsEnd = minTime(c.sendsEnd, rec.expiresAt.Add(-answerMargin))
		return out, true, nil
	}
	out, err = g.observe(out, c, rec)
	return out, false, err
}

// isOOM reports a write refused by a full Redis (maxmemory with noeviction).
// A claim of a free key is answered nil (redis.Nil), which is not looked into.
func isOOM(err error) bool { return err != nil && err != redis.Nil && redis.HasErrorPrefix(err, "OOM") }

// observeFull answers a claim refused by a full Redis, which refuses every SET, even one that
// would change nothing: from the record read with GET, so replays and in-progress answers still
// work. A new key stays refused.
func (g *Guard) observeFull(c *call, out Outcome, stored string, err error) (Outcome, error) {
	if err == nil {
		if rec, derr := decodeStored(stored); derr == nil {
			return g.observe(out, c, rec)
		}
	}
	out.Kind = Unavailable
	return out, fmt.Errorf("%w: claim: the store is out of memory", ErrUnavailable)
}

// observe turns a record someone else wrote into an outcome.
func (g *Guard) observe(out Outcome, c *call, rec record) (Outcome, error) {
	switch {
	case rec.fingerprint != c.fp:
		out.Kind = Mismatch
		return out, errMismatch
	case rec.superseded:
		return superseded(out, rec.supersededBy)
	case rec.unreplayable:
		out.Kind = NotReplayable
		return out, fmt.Errorf("%w: the work ran and will not run again", ErrNotReplayable)
	case rec.completed:
		out.Kind = Replayed
		out.Result = rec.result
		g.remember(c.rk, c.fp, rec.result, rec.expiresAt)
		return out, nil
	default:
		out.Kind = InProgress
		out.RetryAfter = max(rec.expiresAt.Sub(c.now), 0)
		return out, fmt.Errorf("%w, retry after %s", ErrInProgress, out.RetryAfter)
	}
}

// run runs work under the call's deadline and encodes its result. An error means the work failed.
func (g *Guard) run(ctx context.Context, c *call, work Work) (Result, error) {
	wctx := newWorkContext(ctx, c.workDeadline, c, g.opts.fencing)
	defer wctx.release()
	return g.runIn(wctx, c, work)
}

// runIn is run with ctx already ending at the call's work deadline. A result that cannot be
// stored after the work succeeded becomes a marker: the work ran, and must not run again.
func (g *Guard) runIn(ctx context.Context, c *call, work Work) (Result, error) {
	// Work starts only while its claim is held with the safety margin left: a claim whose reply
	// came late (a slow or retried command, a starved process), or a batch item called late, is
	// released without running, so that the next delivery runs it under a claim of its own.
	if !g.opts.now().Before(c.workDeadline) {
		return Result{}, errClaimTooLate
	}
	res, err := runWork(ctx, work)
	if err != nil {
		if unenc := (*unencodable.Error)(nil); errors.As(err, &unenc) {
			res, err, c.unreplayable = Result{}, nil, unenc.Err
		}
	}
	expires := g.opts.now().Add(g.opts.resultTTL)
	if err == nil && c.unreplayable == nil {
		c.result, c.unreplayable = encodeCompleted(c.tok, c.fp, expires, res, maxResultSize)
	}
	if c.unreplayable != nil {
		c.result = encodeMarker(c.tok, c.fp, expires)
	}
	return res, err
}

// released turns the reply to the release script into the outcome of failed work.
func released(out Outcome, werr error, n int64, err error) (Outcome, error) {
	if errors.Is(werr, errClaimTooLate) {
		// Nothing ran: the store answered too late for its claim to be relied on.
		out.Kind = Unavailable
		if err != nil {
			return out, fmt.Errorf("%w (claim not released, it expires at its TTL: %v)", werr, err)
		}
		return out, werr
	}
	out.Kind = Failed
	switch {
	case err != nil:
		return out, fmt.Errorf("idem: work failed: %w (claim not released, it expires at its TTL: %v)", werr, err)
	case n == scriptOtherOwner:
		return out, fmt.Errorf("idem: work failed: %w (claim not released: the key is now held by another owner)", werr)
	}
	return out, fmt.Errorf("idem: work failed: %w", werr)
}

// completed turns the reply to the complete script into the outcome of work that succeeded.
func (g *Guard) completed(c *call, out Outcome, res Result, n int64, err error) (Outcome, error) {
	out.Result, out.Ran = res, true
	switch {
	case err != nil:
		out.Kind = NotStored
		return out, fmt.Errorf("idem: result not stored: %w", err)
	case (n == scriptDone || n == scriptAlreadyOurs) && c.unreplayable != nil:
		out.Kind = NotReplayable
		return out, fmt.Errorf("%w: kept a marker instead: %w", ErrNotReplayable, c.unreplayable)
	case n == scriptDone || n == scriptAlreadyOurs:
		out.Kind = Executed
		g.remember(c.rk, c.fp, res, g.opts.now().Add(g.opts.resultTTL))
		return out, nil
	case n == scriptGone:
		out.Kind = LockLost
		return out, errors.New("idem: lock lost: the claim expired before the result was stored")
	default:
		out.Kind = LockLost
		return out, errors.New("idem: lock lost: the key is now held by another owner")
	}
}

// storeContext is the context of the final complete or release call of a claim that has expired
// by storeEnd at the latest: it must run even when the caller's context is cancelled or its work
// deadline passed (the claim would otherwise linger until its TTL), so it does not end with ctx.
// It ends at storeEnd instead. The client's dial and read timeouts (1s and 500ms in redisconn)
// and its pool's wait for a connection bound each attempt, but not a retry, and an answer later
// than storeEnd comes after another delivery could have claimed the key and run the work, too
// late for the observer to be told first; what the call could still store by then, the claim
// being gone, is nothing. (storeEnd is counted from the claim's reply, so a claim that was slow
// to be sent, or to be answered, leaves the call all the time its TTL gives.) A call made past
// storeEnd (work that outran its context) has no deadline of its own: it only learns what became
// of the key, within the client's timeouts. When Lambda runs the function, whose claims outlast
// the invocation (lockMargin), the invocation ends first.
// The guard's store contexts share one timer (storectx.go); endStore ends one.
func (g *Guard) storeContext(ctx context.Context, storeEnd time.Time) context.Context {
	sctx := context.WithoutCancel(ctx)
	if !g.opts.now().Before(storeEnd) {
		return sctx
	}
	return g.stores.start(sctx, storeEnd)
}

// endStore ends sctx, a context from storeContext, once its call is over.
func endStore(sctx context.Context) {
	if s, ok := sctx.(*storeCtx); ok {
		s.release()
	}
}

func (g *Guard) runUnguarded(ctx context.Context, work Work) (Outcome, error) {
	deadline := g.opts.now().Add(defaultLockTTL)
	if d, ok := ctx.Deadline(); ok {
		deadline = d.Add(-safetyMargin)
	}
	wctx := newWorkContext(ctx, deadline, &call{}, false)
	defer wctx.release()
	res, err := runWork(wctx, work)
	if unenc := (*unencodable.Error)(nil); errors.As(err, &unenc) {
		return Outcome{Kind: ExecutedUnguarded, RoundTrips: 1, Ran: true}, nil
	}
	if err != nil {
		return Outcome{Kind: Failed, RoundTrips: 1}, fmt.Errorf("idem: work failed (unguarded, the store is unreachable): %w", err)
	}
	return Outcome{Kind: ExecutedUnguarded, Result: res, RoundTrips: 1, Ran: true}, nil
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

// runWork runs work, turning a panic into an error that carries the panic's value and stack.
// A success that arrives after the work's context ended is still a success: the work's effect has
// most likely happened, so releasing the claim would make the next retry run it a second time.
// The completion stores it only if the claim is still ours (the script compares the owner
// token); if it expired or passed to another owner meanwhile, the outcome is LockLost.
func runWork(ctx context.Context, work Work) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return work(ctx)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
