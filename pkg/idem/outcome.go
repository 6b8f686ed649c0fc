package idem

import (
	"errors"
	"fmt"
	"time"
)

// Kind says what Do did. It is the one thing to branch on: every Kind fully describes what
// happened to the work and to the stored record. The Kinds in which nothing of the work is
// returned have a sentinel error, which Do's error matches with errors.Is: InProgress
// ErrInProgress, Mismatch ErrMismatch, InvalidKey ErrInvalidKey, Unavailable ErrUnavailable,
// Superseded ErrSuperseded.
type Kind int

// The outcomes of Do.
const (
	// Executed: the key was new, the work ran once here and succeeded, and its result is stored.
	Executed Kind = iota + 1
	// Replayed: the work completed earlier; Outcome.Result is the stored result.
	Replayed
	// InProgress: another owner holds the claim; retry after Outcome.RetryAfter. The error
	// matches ErrInProgress.
	InProgress
	// Mismatch: the key was used before with a different payload fingerprint. The error
	// matches ErrMismatch.
	Mismatch
	// LockLost: the work ran and succeeded, but the claim expired or passed to another owner
	// before its result could be stored. Outcome.Result is the work's result; nothing is stored.
	LockLost
	// NotStored: the work ran and succeeded, but the store failed while its result was being
	// stored. Outcome.Result is the work's result; the claim expires at its TTL, so a retry after
	// that runs the work again. With WithMinReplicas it is also the outcome of Do when the
	// primary stored the result but fewer replicas than asked acknowledged it in time (the error
	// matches ErrReplicasNotAcknowledged): a retry replays it, unless a failover loses it first.
	NotStored
	// Unavailable: the store could not be reached, or held a record this package did not write,
	// or could not be relied on: too few replicas acknowledged the claim (WithMinReplicas), or
	// its eviction policy is refused (WithUnsafeEviction), or the claim's reply came with less
	// than the safety margin of its TTL left (the claim is released). Nothing ran (fail closed).
	Unavailable
	// ExecutedUnguarded: the store could not be reached and the guard was built with
	// WithFailOpen, so the work ran without a claim. Nothing was stored.
	ExecutedUnguarded
	// InvalidKey: the key failed validation; nothing was sent to the store. The error matches
	// ErrInvalidKey.
	InvalidKey
	// Failed: the work returned an error, panicked or ran out of time. The claim was released
	// (when the store allowed) and nothing was cached.
	Failed
	// NotReplayable: the work ran and succeeded, but its result cannot be stored (over the
	// 256 KiB limit once encoded, or one Wrap cannot encode as JSON). In place of the result the
	// guard keeps a marker, "executed, not replayable", for the result TTL, so that no retry
	// runs the work again. In the call that ran the work, Outcome.Ran is true and Outcome.Result
	// is its result; every later call of the key gets NotReplayable with no result.
	NotReplayable
	// Superseded: an ordered event (DoOrdered, Item.Order) whose Version is older than that of
	// an event of the same object that completed successfully. The work did not run, and does
	// not run for this key: a marker is kept for the result TTL, so every retry is Superseded
	// too. Outcome.SupersededBy is the newer Version. The error matches ErrSuperseded.
	Superseded
)

var kindNames = [...]string{"", "executed", "replayed", "in_progress", "mismatch", "lock_lost",
	"not_stored", "unavailable", "executed_unguarded", "invalid_key", "failed", "not_replayable", "superseded"}

// String returns the outcome name used in logs: executed, replayed, in_progress, mismatch,
// lock_lost, not_stored, unavailable, executed_unguarded, invalid_key, failed, not_replayable
// or superseded.
func (k Kind) String() string {
	if k <= 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Outcome is what Do reports for one call.
type Outcome struct {
	Kind Kind
	// Result is the work's result (Executed, LockLost, NotStored, ExecutedUnguarded, and
	// NotReplayable when Ran) or the stored one (Replayed). Its Body is shared with the local cache: do not modify it.
	Result Result
	// RetryAfter is how long until an in-progress claim expires at the latest (InProgress).
	RetryAfter time.Duration
	// RoundTrips counts the round trips to the store for this call (0 when served from the
	// local cache or rejected before any command). For DoBatch it counts those of the whole
	// batch, the same for every item that reached the store.
	RoundTrips int
	// FromLocalCache reports a replay answered by the in-process cache.
	FromLocalCache bool
	// Ran reports that the work ran in this call: always for Executed, LockLost, NotStored
	// and ExecutedUnguarded, and for the NotReplayable of the call whose result could not be
	// stored.
	Ran bool
	// SupersededBy is the Version of the newer event of the same object that superseded this
	// one (Superseded), as its object's watermark held it when this event was first refused.
	SupersededBy int64
}

// Result is what the work produces and what a replay returns: an HTTP-shaped response, so the
// same bytes can be sent again to a retry.
type Result struct {
	Status  int
	Headers map[string]string
	Body    []byte
}

// The error vocabulary of the package, the same from every entry point: the error Do and
// DoBatch return for the Kind named, the errors of the functions Wrap returns, and those
// idemhttp and idemsqs report, all match these with errors.Is. Each error carries more detail
// (the retry-after, the store's own error), so branch with errors.Is, never on the text.
var (
	// ErrInProgress (Kind InProgress): another call holds the key's claim; retry later.
	ErrInProgress = errors.New("idem: in progress")
	// ErrMismatch (Kind Mismatch): the key was used before with a different payload
	// fingerprint.
	ErrMismatch = errors.New("idem: payload mismatch")
	// ErrInvalidKey (Kind InvalidKey): the key failed validation (Key.Validate); nothing was
	// sent to the store.
	ErrInvalidKey = errors.New("idem: invalid key")
	// ErrUnavailable (Kind Unavailable): the store could not be reached, held a record this
	// package did not write, or could not be relied on (ErrReplicasNotAcknowledged,
	// ErrUnsafeEviction); nothing ran.
	ErrUnavailable = errors.New("idem: store unavailable")
	// ErrNotReplayable: the work ran for this key before, but its result could not be stored,
	// so there is nothing to return; the work does not run again (Kind NotReplayable).
	ErrNotReplayable = errors.New("idem: executed before, result not replayable")
	// ErrSuperseded (Kind Superseded): an event of the same object with a newer Version
	// completed before this one could run; the work does not run for this key.
	ErrSuperseded = errors.New("idem: superseded by a newer event of the same object")
)
