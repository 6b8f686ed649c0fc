package idem

import (
	"errors"
	"fmt"
	"time"
)

// Kind says what Do did. Callers switch on it to choose a response.
type Kind int

// The outcomes of Do.
const (
	// Executed: the key was new, the work ran once here and succeeded; its result is stored
	// unless Do also returned an error (ErrLockLost or ErrUnavailable while completing).
	Executed Kind = iota + 1
	// Replayed: the work completed earlier; Outcome.Result is the stored result.
	Replayed
	// InProgress: another owner holds the claim; retry after Outcome.RetryAfter.
	InProgress
	// Mismatch: the key was used before with a different payload fingerprint.
	Mismatch
	// LockLost: the work ran, but the claim expired or passed to another owner before the
	// result could be stored. The result is returned and not stored.
	LockLost
	// Unavailable: the store could not be reached. Nothing ran (fail closed).
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
	"unavailable", "executed_unguarded", "invalid_key", "failed"}

// String returns the outcome name used in logs: executed, replayed, in_progress, mismatch,
// lock_lost, unavailable, executed_unguarded, invalid_key or failed.
func (k Kind) String() string {
	if k <= 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Outcome is what Do reports for one call.
type Outcome struct {
	Kind Kind
	// Result is the work's result (Executed, ExecutedUnguarded, LockLost) or the stored one
	// (Replayed). Its Body is shared with the local cache: do not modify it.
	Result Result
	// RetryAfter is how long until an in-progress claim expires at the latest (InProgress).
	RetryAfter time.Duration
	// RoundTrips counts the commands sent to the store for this call (0 when served from the
	// local cache or rejected before any command).
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

// Sentinel errors. Do returns errors that wrap exactly one of them; branch with errors.Is.
var (
	// ErrInProgress: another owner holds the claim (see *InProgressError for RetryAfter).
	ErrInProgress = errors.New("idem: in progress")
	// ErrMismatch: the key was used with a different payload.
	ErrMismatch = errors.New("idem: payload mismatch for key")
	// ErrLockLost: the claim expired or was taken before the result could be stored.
	ErrLockLost = errors.New("idem: lock lost")
	// ErrUnavailable: the store did not answer in time or answered with a server error.
	ErrUnavailable = errors.New("idem: store unavailable")
	// ErrInvalidKey: the key failed validation.
	ErrInvalidKey = errors.New("idem: invalid key")
	// ErrResultTooLarge: the work's encoded result exceeds the configured limit.
	ErrResultTooLarge = errors.New("idem: result too large")
	// ErrCorruptRecord: the stored value is not a record this package wrote.
	ErrCorruptRecord = errors.New("idem: corrupt record")
)

// KeyError describes why a Key is invalid. It wraps ErrInvalidKey.
type KeyError struct {
	Field  string // "scope" or "id"
	Reason string
}

func (e *KeyError) Error() string { return "idem: invalid key: " + e.Field + " " + e.Reason }

// Unwrap returns ErrInvalidKey.
func (e *KeyError) Unwrap() error { return ErrInvalidKey }

// InProgressError reports a claim held by another owner. It wraps ErrInProgress.
type InProgressError struct {
	// RetryAfter is the time until the claim expires at the latest, per the claimer's clock.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("idem: in progress, retry after %s", e.RetryAfter)
}

// Unwrap returns ErrInProgress.
func (e *InProgressError) Unwrap() error { return ErrInProgress }

// LockLostError reports why a claim was no longer ours when the result was to be stored or the
// claim released. It wraps ErrLockLost.
type LockLostError struct {
	// Expired: the record was gone (its TTL ran out, or it was evicted or flushed).
	// Otherwise another owner's record, or a result stored by another owner, was found.
	Expired bool
}

func (e *LockLostError) Error() string {
	if e.Expired {
		return "idem: lock lost: claim expired before the result was stored"
	}
	return "idem: lock lost: the key is now held by another owner"
}

// Unwrap returns ErrLockLost.
func (e *LockLostError) Unwrap() error { return ErrLockLost }

// StoreError is a failure to talk to the store. It wraps ErrUnavailable and the cause.
type StoreError struct {
	Op  string // "claim", "complete" or "release"
	Err error
}

func (e *StoreError) Error() string {
	return "idem: store unavailable during " + e.Op + ": " + e.Err.Error()
}

// Unwrap returns ErrUnavailable and the underlying error.
func (e *StoreError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// WorkError is a failure of the work itself: its error, a panic, or its context ending.
// It wraps the work's error, so callers can still match their own sentinels.
type WorkError struct {
	Err error
	// Panic holds the recovered value when the work panicked, and Stack its stack.
	Panic any
	Stack []byte
	// ReleaseErr is set when the claim could not be released; it then expires at its TTL.
	ReleaseErr error
}

func (e *WorkError) Error() string {
	msg := "idem: work failed: " + e.Err.Error()
	if e.ReleaseErr != nil {
		msg += " (claim not released: " + e.ReleaseErr.Error() + ")"
	}
	return msg
}

// Unwrap returns the work's error.
func (e *WorkError) Unwrap() error { return e.Err }
