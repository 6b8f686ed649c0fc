// Package refusal is the one mapping from the idempotency core's outcomes to HTTP answers: the
// outcomes in which no response of the work is sent (in progress, payload mismatch, store
// unavailable, invalid key) become a status, a stable code and a retry-after. idemhttp answers
// with it, and so do the functions (the payments API through idemhttp, the webhook function in
// its own codes), so every HTTP front of the core gives one outcome one status.
package refusal

import (
	"time"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/pkg/idem"
)

// RetryAfter is the retry-after of every 409 (in progress) and 503 (store unavailable) answer.
//
// One second, the shortest the header can say, for both. A 409's claim can live until the
// invocation deadline (tens of seconds), but the work it guards usually takes milliseconds:
// the claim's expiry would make a client wait far longer than needed. A 503 lasts as long as the
// store does not answer; a client that retries after 1s and then backs off on its own finds a
// promoted replica as soon as it is there, where a fixed 5s adds up to 5s to every outage.
// Webhook senders ignore the header and follow their own schedules, so only API clients see it.
const RetryAfter = time.Second

// Machine codes of the Idempotency-Key answers (idemhttp and the payments API), stable across
// releases.
const (
	// CodeMissingKey (400): no key header, or a blank one.
	CodeMissingKey = "missing_idempotency_key"
	// CodeInvalidKey (400): a key idemhttp.ParseKey refuses, or one the core refuses.
	CodeInvalidKey = "invalid_idempotency_key"
	// CodeInvalidRequest (400): a body that is not valid base64, or that the fingerprint
	// function refuses.
	CodeInvalidRequest = "invalid_request"
	// CodeUnauthenticated (401): no caller identity.
	CodeUnauthenticated = "unauthenticated"
	// CodeInProgress (409): the first request with this key is still running.
	CodeInProgress = "idempotency_key_in_use"
	// CodeResultUnavailable (409): the first request with this key ran, but its response could
	// not be stored (over 256 KiB once encoded), so it cannot be sent again; the handler does not
	// run again either. No retry-after: retrying changes nothing.
	CodeResultUnavailable = "idempotency_result_unavailable"
	// CodeBodyTooLarge (413): a body over the limit.
	CodeBodyTooLarge = "body_too_large"
	// CodeKeyReused (422): the key came before with another payload.
	CodeKeyReused = "idempotency_key_reused"
	// CodeInternal (500): the handler panicked or ran out of time, and wrote no response.
	CodeInternal = "internal_error"
	// CodeUnavailable (503): Redis could not be reached; nothing ran.
	CodeUnavailable = "store_unavailable"
)

// Refusal is the answer to an outcome in which no response of the work is sent: an error
// status, a stable code, a message, and a retry-after when retrying later can help.
type Refusal struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the retry-after header's value; 0 means no header.
	RetryAfter time.Duration
}

// Of maps the outcomes of idem.Guard.Do in which no response of the work is sent to their
// answer:
//
//	InProgress   409 idempotency_key_in_use   retry-after: RetryAfter
//	Mismatch     422 idempotency_key_reused
//	NotReplayable 409 idempotency_result_unavailable (a later call; the call that ran the
//	             handler has its response, Outcome.Ran)
//	Unavailable  503 store_unavailable        retry-after: RetryAfter
//	InvalidKey   400 invalid_idempotency_key
//
// ok is false for the other Kinds: Executed, Replayed, LockLost, NotStored and
// ExecutedUnguarded carry a response (Outcome.Result), and Failed is the caller's to answer
// (its work failed in its own way). A caller with its own vocabulary (the webhook function)
// may change Code and Message; Status and RetryAfter are the policy.
func Of(k idem.Kind) (r Refusal, ok bool) {
	switch k {
	case idem.InProgress:
		return Refusal{Status: 409, Code: CodeInProgress, RetryAfter: RetryAfter,
			Message: "a request with this idempotency key is still being processed; retry it later"}, true
	case idem.NotReplayable:
		// 409, as for a key in use: the key's state, not the request, is the conflict. It is not
		// 422, which the IETF draft gives to a key reused with another payload (the client's
		// mistake), nor a 5xx, which clients retry: this request was processed and retrying it
		// cannot bring its response back. The code tells it from idempotency_key_in_use.
		return Refusal{Status: 409, Code: CodeResultUnavailable,
			Message: "the request with this idempotency key was processed, but its response was too large to keep; it will not run again"}, true
	case idem.Mismatch:
		return Refusal{Status: 422, Code: CodeKeyReused,
			Message: "this idempotency key was already used with a different request"}, true
	case idem.Unavailable:
		return Refusal{Status: 503, Code: CodeUnavailable, RetryAfter: RetryAfter,
			Message: "the idempotency store is unreachable; nothing was done, retry with the same idempotency key"}, true
	case idem.InvalidKey:
		return Refusal{Status: 400, Code: CodeInvalidKey, Message: "idempotency-key: not usable"}, true
	}
	return Refusal{}, false
}

// Header returns the refusal's extra headers as name, value pairs (lower-case names): the
// retry-after, when it has one. It suits apigw.Error's trailing arguments.
func (r Refusal) Header() []string {
	if r.RetryAfter <= 0 {
		return nil
	}
	return []string{"retry-after", apigw.RetryAfter(r.RetryAfter)}
}
