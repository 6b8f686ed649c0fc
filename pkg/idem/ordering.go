package idem

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ordering events of one object (DoOrdered, Item.Order). An ordered event's keys share one hash
// tag per object, T = {<scope>/<hex sha256(object)>}, so that they all live in one cluster slot
// and one script reaches them all ('/' is in no scope, so no plain key has such a tag):
//
//	<prefix>:T:<hex sha256(id)>   the event's record, in the format of record.go
//	<prefix>:T:run                the object's running lock: the running claim's owner prefix
//	                              (18 bytes), with the claim's TTL
//	<prefix>:T:mark               the object's watermark: the decimal Version of its newest
//	                              event that completed successfully, with the order TTL
//
// The claim (claim_ordered.lua) checks the event's record, then the watermark, then the lock, and
// takes the record and the lock, or writes a superseded marker at the record; the completion
// (complete_ordered.lua) stores the result, raises the watermark and deletes the lock; the release
// after a failure (release_ordered.lua) deletes the record and the lock.

var (
	//go:embed claim_ordered.lua
	claimOrderedSource string
	//go:embed complete_ordered.lua
	completeOrderedSource string
	//go:embed release_ordered.lua
	releaseOrderedSource string

	claimOrderedScript    = redis.NewScript(claimOrderedSource)
	completeOrderedScript = redis.NewScript(completeOrderedSource)
	releaseOrderedScript  = redis.NewScript(releaseOrderedSource)
)

// Order places one call among the events of one object (DoOrdered, Item.Order).
type Order struct {
	// Object names the object the event is about, within the key's Scope (Stripe's
	// data.object.id, a Shopify resource id): 1 to MaxIDLength bytes of printable text, like a
	// Key's ID, and hashed like it. Empty: the call is not ordered.
	Object string
	// Version is the event's position in its object's history: larger is newer. An event time
	// in Unix seconds or milliseconds, or a sequence number; one object's events must all use
	// the same unit. Events of equal Version never supersede each other.
	Version int64
}

// WithOrderTTL sets how long an object's watermark, the Version of its newest event that
// completed, is kept after that completion (each completion of the object renews it). It must
// be at least the sender's retry window (its retention of events): an older event retried after
// the watermark expired runs. Default 0: the result TTL (WithResultTTL).
func WithOrderTTL(d time.Duration) Option { return func(o *options) { o.orderTTL = d } }

func (o options) validateOrder() error {
	if o.orderTTL != 0 && o.orderTTL < time.Millisecond {
		return fmt.Errorf("idem: order TTL %s is below 1ms", o.orderTTL)
	}
	return nil
}

// errOrderedUnsupported explains a call ordered on a guard whose options ordering does not
// support.
var errOrderedUnsupported = fmt.Errorf("%w: ordering (DoOrdered, Item.Order) is not supported together with WithFencing or WithMinReplicas", ErrUnavailable)

// orderingSupported reports why the guard cannot order calls, or nil.
func (g *Guard) orderingSupported() error {
	if g.opts.fencing || g.opts.minReplicas > 0 {
		return errOrderedUnsupported
	}
	return nil
}

// DoOrdered is Do for an event of order.Object: besides Do's per-key semantics, at most one
// event of the object runs at a time, and an event older than one of the object that completed
// does not run.
//
//   - The event's own record is read first: a completed event replays (Replayed), a key used
//     with another fingerprint is a Mismatch, an event in progress is InProgress, as with Do.
//   - An event whose Version is strictly lower than the object's watermark, the Version of its
//     newest event that completed successfully, does not run (Superseded, the error matching
//     ErrSuperseded, Outcome.SupersededBy the watermark). A marker is kept at the event's key
//     for the result TTL, so that every retry of it is Superseded again in one round trip, even
//     after the watermark expired.
//   - While another event of the object runs, the event is InProgress (ErrInProgress), with
//     Outcome.RetryAfter the running claim's remaining TTL.
//   - Otherwise it runs as under Do. An equal or newer Version runs: ties never supersede. Its
//     success raises the watermark to its Version (never lowers it), also when its result could
//     not be stored (LockLost, NotStored, NotReplayable: the work ran); its failure changes
//     nothing of the object, so a newer event that failed supersedes nothing.
//
// The budget is Do's: 2 round trips for a first execution (one claim script, one completion
// script), 1 for a replay, an in-progress or a superseded event, 2 for a failure. The watermark
// lives for WithOrderTTL after the object's last completion; an older event retried after that
// runs. An event's record has a key of its own, apart from Do's record of the same Key: a key is
// always called ordered, or never. An empty order.Object is Do. An invalid Object is InvalidKey.
// A guard built WithFencing or WithMinReplicas refuses an ordered call (Unavailable): those do
// not combine with ordering.
func (g *Guard) DoOrdered(ctx context.Context, key Key, order Order, fp Fingerprint, work Work) (Outcome, error) {
	if order.Object == "" {
		return g.Do(ctx, key, fp, work)
	}
	c, o := &call{}, &orderedCall{}
	out, err := g.doOrdered(ctx, c, o, key, order, fp, work)
	g.notify(c, out, err)
	return out, err
}

// orderedCall is what an ordered call adds to its call: the object's keys, its Version.
type orderedCall struct {
	// keys are the event's record (the call's rk), the object's lock and its watermark.
	keys    [3]string
	version string
	// marker is the header of our superseded marker, which the claim writes if the event is
	// superseded.
	marker     [headerSize]byte
	markerText string
	claimArgs  [5]any
	ttl        int64 // the claim's TTL in milliseconds
}

// orderedKeys returns an ordered event's record key and its object's lock and watermark keys.
func orderedKeys(prefix string, key Key, object string) (rk, lock, mark string) {
	obj, id := sha256.Sum256([]byte(object)), sha256.Sum256([]byte(key.ID))
	var b strings.Builder
	b.Grow(len(prefix) + len(key.Scope) + 6 + 4*sha256.Size)
	b.WriteString(prefix)
	b.WriteString(":{")
	b.WriteString(key.Scope)
	b.WriteByte('/')
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], obj[:])
	b.Write(hexSum[:])
	b.WriteString("}:")
	base := b.String()
	hex.Encode(hexSum[:], id[:])
	return base + string(hexSum[:]), base + "run", base + "mark"
}

// validateObject reports why object cannot name an ordered event's object, or nil.
func validateObject(object string) error {
	if len(object) > MaxIDLength {
		return fmt.Errorf("%w: order object must be 1 to %d bytes", ErrInvalidKey, MaxIDLength)
	}
	for i := 0; i < len(object); i++ {
		if c := object[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: order object byte %d is a control character", ErrInvalidKey, i)
		}
	}
	return nil
}

// startOrdered is start for an ordered call: the key and the object are checked, and the call's
// record is the event's ordered record.
func (g *Guard) startOrdered(c *call, o *orderedCall, key Key, order Order, fp Fingerprint, now time.Time) (Outcome, bool, error) {
	if err := key.Validate(); err != nil {
		return Outcome{Kind: InvalidKey}, false, err
	}
	if err := validateObject(order.Object); err != nil {
		return Outcome{Kind: InvalidKey}, false, err
	}
	if err := g.orderingSupported(); err != nil {
		return Outcome{Kind: Unavailable}, false, err
	}
	rk, lock, mark := orderedKeys(g.opts.prefix, key, order.Object)
	o.keys = [3]string{rk, lock, mark}
	o.version = strconv.FormatInt(order.Version, 10)
	return g.begin(c, key, rk, fp, now)
}

// orderedClaimArgs are the arguments of the ordered claim of c, after c.deadlines.
func (g *Guard) orderedClaimArgs(c *call, o *orderedCall) []any {
	putHeader(o.marker[:], kindSuperseded, c.tok, c.fp, c.now.Add(g.opts.resultTTL))
	o.markerText = string(o.marker[:])
	o.ttl = c.lockTTL.Milliseconds()
	o.claimArgs = [5]any{c.claimText, o.ttl, o.version, o.markerText, g.resultTTLms}
	return o.claimArgs[:]
}

// orderTTLms is the watermark's TTL in milliseconds.
func (g *Guard) orderTTLms() int64 {
	if g.opts.orderTTL > 0 {
		return g.opts.orderTTL.Milliseconds()
	}
	return g.opts.resultTTL.Milliseconds()
}

// orderedReply reads the ordered claim's reply: a record (stored), redis.Nil when the claim is
// ours, or busy > 0, the running lock's remaining TTL, when another event of the object runs.
func orderedReply(cmd *redis.Cmd) (stored []byte, busy time.Duration, err error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, 0, err
	}
	switch v := v.(type) {
	case string:
		return []byte(v), 0, nil
	case int64:
		if v == 0 {
			return nil, 0, redis.Nil
		}
		if v > 0 {
			return nil, time.Duration(v) * time.Millisecond, nil
		}
	}
	return nil, 0, fmt.Errorf("idem: claim: unexpected reply %v to the ordered claim", v)
}

// objectBusy is the outcome of an event whose object another event's claim holds for retry.
func objectBusy(out Outcome, retry time.Duration) (Outcome, error) {
	out.Kind = InProgress
	out.RetryAfter = retry
	return out, fmt.Errorf("%w, retry after %s: another event of the object is running", ErrInProgress, retry)
}

// superseded is the outcome of an event its object's watermark by superseded.
func superseded(out Outcome, by int64) (Outcome, error) {
	out.Kind, out.SupersededBy = Superseded, by
	return out, fmt.Errorf("%w: version %d of the object completed", ErrSuperseded, by)
}

// errClaimTooLate is the error of a claim whose work was to start when its deadline had passed
// (the claim's reply came late, or a batch's run called the work late): the work did not run,
// the claim was released, and the outcome is Unavailable, so that the caller answers as for a
// store it cannot rely on (the webhook functions: 503 with retry-after) and the next delivery
// runs the work under a claim of its own.
var errClaimTooLate = fmt.Errorf("%w: the work's deadline had passed when it was to start (a late claim reply); the work did not run", ErrUnavailable)

// doOrdered is DoOrdered, before the observer hears of the outcome.
func (g *Guard) doOrdered(ctx context.Context, c *call, o *orderedCall, key Key, order Order, fp Fingerprint, work Work) (Outcome, error) {
	if out, ok, err := g.startOrdered(c, o, key, order, fp, g.opts.now()); !ok {
		return out, err
	}
	out, err := g.admitEviction(ctx)
	if err != nil {
		return out, err
	}
	c.deadlines(ctx, g.opts)
	cmd, trips := g.scripts.call(ctx, claimOrderedScript, o.keys[:], g.orderedClaimArgs(c, o)...)
	out.RoundTrips += trips
	stored, busy, cerr := orderedReply(cmd)
	if isOOM(cerr) {
		out.RoundTrips++
		s, err := g.client.Do(ctx, "get", c.rk).Text()
		return g.observeFull(c, out, s, err)
	}
	if cerr != nil && !errors.Is(cerr, redis.Nil) && g.opts.failOpen {
		return g.runUnguarded(ctx, work)
	}
	if busy > 0 {
		return objectBusy(out, busy)
	}
	if out, claimed, err := g.claimed(c, out, stored, cerr); !claimed {
		return out, err
	}
	c.storeEnd = g.opts.now().Add(c.lockTTL) // the claim's reply has just come
	res, werr := g.run(ctx, c, work)         // nothing runs past the work's deadline (runIn)
	sctx := g.storeContext(ctx, c.storeEnd)
	defer endStore(sctx)
	if werr != nil {
		n, trips, rerr := g.scripts.run(sctx, releaseOrderedScript, o.keys[:2], c.owner())
		out.RoundTrips += trips
		return released(out, werr, n, rerr)
	}
	_, args := g.completionArgs(c)
	n, trips, serr := g.scripts.run(sctx, completeOrderedScript, o.keys[:], args[0], args[1], args[2], o.version, g.orderTTLms())
	out.RoundTrips += trips
	return g.completed(c, out, res, n, serr)
}
