package idem

import (
	"errors"
	"fmt"
	"time"
)

// Fixed parts of the guard's timing and limits: every deployment so far has used these values,
// so they are not options.
const (
	defaultPrefix    = "idem"
	defaultResultTTL = 24 * time.Hour
	// defaultLockTTL is the claim TTL when the context has no deadline.
	defaultLockTTL = 30 * time.Second
	// lockMargin is what a derived claim TTL adds to the invocation's remaining time, so the
	// claim outlives the invocation.
	lockMargin = 2 * time.Second
	// safetyMargin is how long before the claim's expiry and before the invocation deadline the
	// work's context ends, leaving time to store the result or release the claim (that final
	// call is bounded by the client's own timeouts).
	safetyMargin = 500 * time.Millisecond
	// maxResultSize is the largest encoded result stored, in bytes; a larger result fails the
	// call (it is never truncated).
	maxResultSize = 256 << 10
)

type options struct {
	prefix    string
	resultTTL time.Duration
	lockTTL   time.Duration
	failOpen  bool
	cacheSize int
	cacheTTL  time.Duration
	now       func() time.Time
	fencing   bool
	observe   func(Observation)
	// minReplicas and replicaTimeout: WithMinReplicas (replicas.go).
	minReplicas    int
	replicaTimeout time.Duration
	// unsafeEviction: WithUnsafeEviction (eviction.go).
	unsafeEviction EvictionAction
	// orderTTL: WithOrderTTL (ordering.go); 0 means the result TTL.
	orderTTL time.Duration
}

func defaultOptions() options {
	return options{prefix: defaultPrefix, resultTTL: defaultResultTTL, now: time.Now}
}

// Option configures a Guard.
type Option func(*options)

// WithPrefix sets the namespace of every key the guard writes. Default "idem".
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithResultTTL sets how long a completed result is kept and replayed. It must outlive every
// retry the sender can still make. Default 24h.
func WithResultTTL(d time.Duration) Option { return func(o *options) { o.resultTTL = d } }

// WithLockTTL fixes how long an in-progress claim lives; it must exceed 500ms, the time the
// work's context ends before the claim expires. Default 0: derived per call as the time left
// until the context's deadline (the Lambda invocation deadline) plus 2s, so the claim cannot
// expire while the work may still run; 30s when the context has no deadline.
func WithLockTTL(d time.Duration) Option { return func(o *options) { o.lockTTL = d } }

// WithFailOpen makes the guard run the work without a claim when the store is unreachable
// (outcome ExecutedUnguarded) instead of refusing it (outcome Unavailable). Default false:
// fail closed. Only for work that is harmless to repeat.
func WithFailOpen(enabled bool) Option { return func(o *options) { o.failOpen = enabled } }

// WithLocalCache keeps up to size completed results in process memory for at most ttl (never
// beyond the stored result's own expiry), so a replay inside a warm environment costs no
// round trip. In-progress records are never cached. Default off.
func WithLocalCache(size int, ttl time.Duration) Option {
	return func(o *options) { o.cacheSize, o.cacheTTL = size, ttl }
}

// WithClock replaces time.Now, the clock the guard reads to derive claim expiries and work
// deadlines. For tests: the store's own TTLs still run on the store's clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

func (o options) validate() error {
	switch {
	case o.prefix == "":
		return fmt.Errorf("idem: empty key prefix")
	case o.resultTTL < time.Millisecond:
		return fmt.Errorf("idem: result TTL %s is below 1ms", o.resultTTL)
	case o.lockTTL < 0, o.cacheSize < 0, o.cacheTTL < 0, o.orderTTL < 0:
		return fmt.Errorf("idem: negative option")
	case o.lockTTL != 0 && o.lockTTL <= safetyMargin:
		return fmt.Errorf("idem: lock TTL %s must exceed the safety margin %s", o.lockTTL, safetyMargin)
	}
	return errors.Join(o.validatePrefix(), o.validateReplicas(), o.unsafeEviction.validate(), o.validateOrder())
}

func (o options) validatePrefix() error {
	for i := 0; i < len(o.prefix); i++ {
		if c := o.prefix[i]; c <= ' ' || c == '{' || c == '}' || c == 0x7f {
			return fmt.Errorf("idem: key prefix %q holds a space, control character or brace", o.prefix)
		}
	}
	return nil
}
