// Package ledger is the durable record of payments. A payment is written once per scoped
// idempotency key with a conditional write, so even if the Redis record that normally
// deduplicates a request is lost (a failover, an eviction), a retried request finds the payment
// it already created instead of creating a second one.
//
// Two implementations share one contract: [DynamoDB] for AWS and [Memory] for local runs and
// tests.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemlambda/idem/pkg/idem"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrExists is returned by Create, together with the payment already stored, when a payment
	// exists for the scoped key.
	ErrExists = errors.New("ledger: a payment exists for this key")
	// ErrNotFound is returned by Get when no payment has the id, or the payment belongs to
	// another principal; the two are indistinguishable on purpose.
	ErrNotFound = errors.New("ledger: payment not found")
	// ErrDuplicateID is returned by Create when another key already holds a payment with the same
	// id. Nothing is written; the caller should generate a new id.
	ErrDuplicateID = errors.New("ledger: payment id already used")
	// ErrFenced is returned by Create when the payment for the scoped key was written under a
	// claim with a larger fencing token than the caller's: the caller's claim was taken over
	// (it was paused or slow past it) and nothing is written. The payment is not returned: it is
	// the new owner's to report.
	ErrFenced = errors.New("ledger: refused: a later claim of this key wrote the payment")
)

// MaxKeyLen is the longest scoped key or payment id accepted, in bytes. It keeps the DynamoDB
// partition key, which adds a short prefix, under DynamoDB's 2048-byte limit.
const MaxKeyLen = 2000

// Payment is one payment as the ledger stores it. Principal and Fingerprint are stored but never
// serialized to JSON, so the struct can be returned to API callers as is.
type Payment struct {
	// ID identifies the payment; the caller generates it (unique, unguessable).
	ID string `json:"id"`
	// Principal is the caller that owns the payment; only this principal can Get it.
	Principal string `json:"-"`
	// Amount is in minor units of Currency.
	Amount int64 `json:"amount"`
	// Currency is the ISO 4217 code.
	Currency string `json:"currency"`
	// Status is the payment's state, for example "succeeded".
	Status string `json:"status"`
	// CreatedAt is when the payment was created. The ledger stores it in UTC with nanosecond
	// precision and returns it in UTC.
	CreatedAt time.Time `json:"created_at"`
	// Fingerprint is the hash of the request that created the payment, kept so a retry can be
	// checked against the original request.
	Fingerprint string `json:"-"`
	// Fence is the fencing token of the claim that wrote the payment (idem.FenceFrom of the
	// context Create was called with), 0 when it had none.
	Fence uint64 `json:"-"`
}

// Ledger stores payments durably, at most one per scoped idempotency key.
type Ledger interface {
	// Create writes p under scopedKey with a conditional write (only if no payment exists for
	// that key). If one already exists it returns the existing payment and ErrExists (so a retry
	// after a lost cache record returns the original payment), or the existing payment and
	// ErrFenced when it was written under a larger fencing token than the one ctx carries
	// (idem.FenceFrom): the caller's claim was taken over, and the payment is the later owner's. Create reads ctx's token itself and
	// records it with the payment; it refuses to write once ctx is done or past its deadline,
	// checked immediately before the write. If p.ID is already used under
	// another key it returns ErrDuplicateID and writes nothing. On success it returns p as
	// stored (CreatedAt in UTC).
	Create(ctx context.Context, scopedKey string, p Payment) (Payment, error)
	// Get returns the payment with this id owned by principal; another principal's payment or an
	// unknown id -> ErrNotFound.
	Get(ctx context.Context, principal, id string) (Payment, error)
}

// live returns why the work that ctx belongs to must not write any more, or nil: ctx is done, or
// its deadline has passed by the clock even if its timer has not fired yet (a process resumed
// after a pause runs its goroutines before its timers).
func live(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// refused returns existing with ErrFenced when it was written under a larger fencing token
// than the caller's, else existing with ErrExists.
func refused(ctx context.Context, existing Payment) (Payment, error) {
	if fence, ok := idem.FenceFrom(ctx); ok && fence < existing.Fence {
		return existing, fmt.Errorf("%w (token %d, the payment's %d)", ErrFenced, fence, existing.Fence)
	}
	return existing, ErrExists
}

// prepare checks the arguments of Create and returns p in its stored form, with ctx's fencing
// token.
func prepare(ctx context.Context, scopedKey string, p Payment) (Payment, error) {
	switch {
	case scopedKey == "":
		return Payment{}, errors.New("ledger: empty scoped key")
	case len(scopedKey) > MaxKeyLen:
		return Payment{}, fmt.Errorf("ledger: scoped key is %d bytes, over %d", len(scopedKey), MaxKeyLen)
	case p.ID == "":
		return Payment{}, errors.New("ledger: payment has no id")
	case len(p.ID) > MaxKeyLen:
		return Payment{}, fmt.Errorf("ledger: payment id is %d bytes, over %d", len(p.ID), MaxKeyLen)
	case p.Principal == "":
		return Payment{}, errors.New("ledger: payment has no principal")
	}
	p.CreatedAt = p.CreatedAt.UTC()
	p.Fence, _ = idem.FenceFrom(ctx)
	return p, nil
}
