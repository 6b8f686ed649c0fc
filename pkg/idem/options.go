package idem

import (
	"fmt"
	"time"
)

// Defaults of the options below.
const (
	DefaultPrefix        = "idem"
	DefaultResultTTL     = 24 * time.Hour
	DefaultLockMargin    = 2 * time.Second
	DefaultSafetyMargin  = 500 * time.Millisecond
	DefaultLockTTL       = 30 * time.Second
	DefaultMaxResultSize = 256 << 10
)

type options struct {
	prefix        string
	resultTTL     time.Duration
	lockTTL       time.Duration
	lockMargin    time.Duration
	safetyMargin  time.Duration
	maxResultSize int
	failOpen      bool
	condSet       bool
	plainScripts  bool
	cacheSize     int
	cacheTTL      time.Duration
	now           func() time.Time
}

func defaultOptions() options {
	return options{
		prefix:        DefaultPrefix,
		resultTTL:     DefaultResultTTL,
		lockMargin:    DefaultLockMargin,
		safetyMargin:  DefaultSafetyMargin,
		maxResultSize: DefaultMaxResultSize,
		now:           time.Now,
	}
}

// Option configures a Guard.
type Option func(*options)

// WithPrefix sets the namespace of every key the guard writes. Default "idem".
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithResultTTL sets how long a completed result is kept and replayed. It must outlive every
// retry the sender can still make. Default 24h.
func WithResultTTL(d time.Duration) Option { return func(o *options) { o.resultTTL = d } }

// WithLockTTL fixes how long an in-progress claim lives. Default 0: derived per call as the
// time left until the context's deadline (the Lambda invocation deadline) plus the lock margin,
// so the claim cannot expire while the work may still run; DefaultLockTTL (30s) when the
// context has no deadline.
func WithLockTTL(d time.Duration) Option { return func(o *options) { o.lockTTL = d } }

// WithLockMargin sets what a derived claim TTL adds to the invocation's remaining time.
// Default 2s.
func WithLockMargin(d time.Duration) Option { return func(o *options) { o.lockMargin = d } }

// WithSafetyMargin sets how long before the claim's expiry and before the invocation deadline
// the work's context ends, leaving time to store the result or release the claim (that final
// call is bounded by the client's own timeouts). Default 500ms.
func WithSafetyMargin(d time.Duration) Option { return func(o *options) { o.safetyMargin = d } }

// WithMaxResultSize sets the largest encoded result stored, in bytes; a larger result fails
// the call with ErrResultTooLarge (it is never truncated). Default 256 KiB. 0 means no limit.
func WithMaxResultSize(n int) Option { return func(o *options) { o.maxResultSize = n } }

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

// WithConditionalSet stores results with one plain conditional command,
// SET key <result> IFEQ <claim> PX <result TTL> GET, instead of the complete.lua script. It needs
// Valkey 8.1 or later or Redis 8.4 or later (ElastiCache for Valkey 8.1 and 8.2 qualify). The
// guarantee is the same: the result replaces the record only while it is still exactly our claim.
// The server then runs one SET instead of a script that calls GET and SET (INFO commandstats
// counts 2 commands per first execution instead of 4). Default off. On a server without IFEQ the
// first store answers a syntax error, which writes nothing; the guard then uses the script for
// good, so a wrong setting costs one round trip per environment, never a result. A full server
// (maxmemory with noeviction) refuses the SET; that store goes through the script, which may
// still write.
func WithConditionalSet(enabled bool) Option { return func(o *options) { o.condSet = enabled } }

// WithoutScriptFlags sends the scripts without their shebang line (#!lua flags=allow-oom), for
// servers that cannot compile it, such as the embedded miniredis of a local run (which has no
// memory limit to allow past). Without it such a server costs one refused script per guard
// before the guard finds out by itself. Never needed for Redis 7+ or Valkey.
func WithoutScriptFlags() Option { return func(o *options) { o.plainScripts = true } }

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

func (o options) validate() error {
	switch {
	case o.prefix == "":
		return fmt.Errorf("idem: empty key prefix")
	case o.resultTTL < time.Millisecond:
		return fmt.Errorf("idem: result TTL %s is below 1ms", o.resultTTL)
	case o.lockTTL < 0, o.lockMargin < 0, o.safetyMargin < 0, o.maxResultSize < 0, o.cacheSize < 0, o.cacheTTL < 0:
		return fmt.Errorf("idem: negative option")
	case o.lockTTL != 0 && o.lockTTL <= o.safetyMargin:
		return fmt.Errorf("idem: lock TTL %s must exceed the safety margin %s", o.lockTTL, o.safetyMargin)
	}
	return o.validatePrefix()
}

func (o options) validatePrefix() error {
	for i := 0; i < len(o.prefix); i++ {
		if c := o.prefix[i]; c <= ' ' || c == '{' || c == '}' || c == 0x7f {
			return fmt.Errorf("idem: key prefix %q holds a space, control character or brace", o.prefix)
		}
	}
	return nil
}
