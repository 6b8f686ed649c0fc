package idem

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemlambda/idem/pkg/idem/internal/unencodable"
)

// Wrap returns fn guarded by g: a function with fn's signature that runs fn at most once per
// key, within the same round-trip budget as Do (2 for a first call, 1 for a replay or an
// in-progress duplicate). It is meant for any Lambda handler, or any function an at-least-once
// source calls. A nil guard or fn, or a scope Key.Validate refuses, is an error here, at
// construction, never a panic at the first call.
//
// The key is Key{Scope: scope, ID: key(in)}, and the payload's fingerprint is fingerprint(in).
// A nil key uses the hex SHA-256 of the canonical JSON of the whole input (object keys sorted),
// so equal inputs share a key; a nil fingerprint uses that same hash, so a key chosen from one
// field (an order id, a message id) with another input is a mismatch, never a replay. To
// compare only some fields, return FingerprintJSON of them.
//
// The first call's result is stored as JSON (encoding/json: exported fields only) and decoded
// into Out for every replay. An error from fn releases the claim and is returned (wrapped:
// errors.Is still finds it), so the next call runs fn again. The other failures match, with
// errors.Is, the package's sentinels: ErrInProgress while another call holds the key (the event
// source should retry later), ErrMismatch for a key used with another input, ErrInvalidKey for
// a key that key(in) made unusable, ErrUnavailable when the store cannot be reached (nothing
// ran), ErrNotReplayable for a key whose fn ran before but whose result could not be stored
// (over the 256 KiB limit once encoded, or not encodable as JSON): fn does not run again. When
// fn succeeded but its result could not be stored, its result is returned with a nil error: the
// work was done. Build g WithObserver to hear of those.
func Wrap[In, Out any](g *Guard, scope string, key func(In) string, fingerprint func(In) (Fingerprint, error),
	fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, error), error) {
	switch {
	case g == nil:
		return nil, errors.New("idem: Wrap: nil guard")
	case fn == nil:
		return nil, errors.New("idem: Wrap: nil function")
	}
	if err := (Key{Scope: scope, ID: "x"}).Validate(); err != nil {
		return nil, fmt.Errorf("idem: Wrap: %w", err)
	}
	return func(ctx context.Context, in In) (Out, error) {
		var zero Out
		id, fp, err := keyOf(in, key, fingerprint)
		if err != nil {
			return zero, err
		}
		var ran Out
		out, err := g.Do(ctx, Key{Scope: scope, ID: id}, fp, func(ctx context.Context) (Result, error) {
			v, err := fn(ctx, in)
			if err != nil {
				return Result{}, err
			}
			ran = v
			body, err := json.Marshal(v)
			if err != nil {
				// fn ran: keep a marker rather than release the claim and run it again.
				return Result{}, &unencodable.Error{Err: fmt.Errorf("idem: encode the result as JSON: %w", err)}
			}
			return Result{Body: body}, nil
		})
		switch out.Kind {
		case Executed, ExecutedUnguarded, LockLost, NotStored:
			return ran, nil
		case NotReplayable:
			if out.Ran {
				return ran, nil
			}
			return zero, fmt.Errorf("%w: key %q in scope %s", ErrNotReplayable, id, scope)
		case Replayed:
			var v Out
			if err := json.Unmarshal(out.Result.Body, &v); err != nil {
				return zero, fmt.Errorf("idem: decode the stored result of key %q in scope %s: %w", id, scope, err)
			}
			return v, nil
		case Mismatch:
			return zero, fmt.Errorf("%w for key %q in scope %s", ErrMismatch, id, scope)
		case Unavailable:
			if !errors.Is(err, ErrUnavailable) {
				err = fmt.Errorf("%w: %w", ErrUnavailable, err) // errors.Is finds the cause too
			}
			return zero, err
		}
		// InProgress, Unavailable, InvalidKey: Do's error matches the Kind's sentinel; Failed:
		// it wraps fn's error.
		return zero, err
	}, nil
}

// keyOf derives a call's key ID and fingerprint from its input, with Wrap's defaults.
func keyOf[In any](in In, key func(In) string, fingerprint func(In) (Fingerprint, error)) (string, Fingerprint, error) {
	var whole Fingerprint
	if key == nil || fingerprint == nil {
		b, err := json.Marshal(in)
		if err != nil {
			return "", Fingerprint{}, fmt.Errorf("idem: encode the input as JSON: %w", err)
		}
		if whole, err = FingerprintJSON(b); err != nil {
			return "", Fingerprint{}, err
		}
	}
	var id string
	if key != nil {
		id = key(in)
	} else {
		id = hex.EncodeToString(whole[:])
	}
	fp := whole
	if fingerprint != nil {
		var err error
		if fp, err = fingerprint(in); err != nil {
			return "", Fingerprint{}, fmt.Errorf("idem: fingerprint: %w", err)
		}
	}
	return id, fp, nil
}
