package idem

import (
	"errors"
	"fmt"
	"time"
)

// Kind says what Do did. It is the one thing to branch on: every Kind fully describes what
// happened to the work and to the stored record.
type Kind int

// The outcomes of Do.
const (
	// Executed: the key was new, the work ran once here and succeeded, and its result is stored.
	Executed Kind = iota + 1
	// Replayed: the work completed earlier; Outcome.Result is the stored result.
	Replayed
	// InProgress: another owner holds the claim; retry after Outcome.RetryAfter.
	InProgress
	// Mismatch: the key was used before with a different payload fingerprint.
	Mismatch
	// LockLost: the work ran and succeeded, but the claim expired or passed to another owner
	// before its result could be stored. Outcome.Result is the work's result; nothing is stored.
	LockLost
	// NotStored: the work ran and succeeded, but the store failed while its result was being
	// stored. Outcome.Result is the work's result; the claim expires at its TTL, so a retry after
	// that runs the work again.
	NotStored
	// Unavailable: the store could not be reached, or held a record this package did not write,
	// or could not be relied on: too few replicas acknowledged the claim (WithMinReplicas), or
	// its eviction policy is refused (WithUnsafeEviction). Nothing ran (fail closed).
	Unavailable
	// ExecutedUnguarded: the store could not be reached and the guard was built with
	// WithFailOpen, so the work ran without a claim. Nothing was stored.
	ExecutedUnguarded
	// InvalidKey: the key failed validation; nothing was sent to the store.
	InvalidKey
	// Failed: the work returned an error, panicked, ran out of time, or produced a result too
	// large to store. The claim was released (when the store allowed) and nothing was cached.
	Failed
)

var kindNames = [...]string{"", "executed", "replayed", "in_progress", "mismatch", "lock_lost",
	"not_stored", "unavailable", "executed_unguarded", "invalid_key", "failed"}

// String returns the outcome name used in logs: executed, replayed, in_progress, mismatch,
// lock_lost, not_stored, unavailable, executed_unguarded, invalid_key or failed.
func (k Kind) String() string {
	if k <= 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Outcome is what Do reports for one call.
type Outcome struct {
	Kind Kind
	// Result is the work's result (Executed, LockLost, NotStored, ExecutedUnguarded) or the
	// stored one (Replayed). Its Body is shared with the local cache: do not modify it.
	Result Result
	// RetryAfter is how long until an in-progress claim expires at the latest (InProgress).
	RetryAfter time.Duration
	// RoundTrips counts the round trips to the store for this call (0 when served from the
	// local cache or rejected before any command). For DoBatch it counts those of the whole
	// batch, the same for every item that reached the store.
	RoundTrips int
	// FromLocalCache reports a replay answered by the in-process cache.
	FromLocalCache bool
}

// Result is what the work produces and what a replay returns: an HTTP-shaped response, so the
// same bytes can be sent again to a retry.
type Result struct {
	Status  int
	Headers map[string]string
	Body    []byte
}

// Errors returned by the function Wrap returns, for its callers to branch on with errors.Is.
// Do itself reports through Outcome.Kind.
var (
	// ErrInProgress: another call holds the key's claim; retry later.
	ErrInProgress = errors.New("idem: in progress")
	// ErrMismatch: the key was used before with a different input.
	ErrMismatch = errors.New("idem: payload mismatch for key")
	// ErrUnavailable: the store could not be reached (or relied on: ErrReplicasNotAcknowledged,
	// ErrUnsafeEviction); nothing ran.
	ErrUnavailable = errors.New("idem: store unavailable")
)
