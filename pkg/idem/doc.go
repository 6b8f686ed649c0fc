// Package idem makes a unit of work run exactly once per idempotency key, with Redis or Valkey
// as the shared store, from any number of concurrent AWS Lambda execution environments.
//
// One record lives under each key. A first delivery claims the key with one atomic
// SET NX PX GET that stores an in-progress record (owner token, payload fingerprint, expiry);
// the same command returns the record already there when the key is taken, so observing a
// duplicate costs no extra round trip. After the work succeeds, one Lua script replaces the
// in-progress record with the result, but only while the owner token is still ours; after a
// failure, one Lua script deletes the record under the same condition. The budget is therefore:
//
//	first execution        2 round trips (claim, complete)
//	replay of a result     1 round trip  (claim observes the completed record)
//	in-progress duplicate  1 round trip  (claim observes the in-progress record)
//	failure                2 round trips (claim, release)
//
// DoBatch keeps that budget per batch rather than per key: the claims of a whole batch go out
// in one pipelined round trip, their completions and releases in one more.
//
// Keys are hashed and hash-tagged (<prefix>:{<scope>:<sha256(id)>}), so every command touches
// one slot and the package works unchanged on Redis Cluster and ElastiCache Serverless. The
// claim needs SET with both NX and GET, which Redis 7.0, Valkey 7.2 and later accept.
//
// The context passed to the work ends 500ms before the claim can expire and before the
// invocation's own deadline (see WithLockTTL), by the clock even when its timer has not fired, so
// work that overruns, or resumes after its process was paused, finds its context ended before
// another owner can hold the key. A side effect already under way when a pause began is not
// stopped by that: WithFencing gives every claim a token (FenceFrom) that a downstream store
// checks. Nothing is cached unless the work succeeds; a result that cannot be stored after the
// work succeeded leaves a marker (NotReplayable) so that the work does not run again.
//
// Do reports what happened through Outcome.Kind. Wrap turns any func(context.Context, In)
// (Out, error) into one that runs once per key, with results stored as JSON, and reports through
// errors instead. Both speak one vocabulary: the Kinds in which nothing of the work is returned
// have a sentinel error (InProgress ErrInProgress, Mismatch ErrMismatch, InvalidKey
// ErrInvalidKey, Unavailable ErrUnavailable), which the errors of Do, DoBatch, Wrap, idemhttp and
// idemsqs match with errors.Is.
//
// Every constructor (New, Wrap, idemsqs.New, idemhttp.New) returns an error and refuses a nil
// guard, client or function, so a handler declared before its guard exists fails at init, not
// at its first call. The package reads no environment variable: a program maps its own to the
// options.
package idem
