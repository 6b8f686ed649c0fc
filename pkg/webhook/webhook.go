// Package webhook verifies the signatures of webhook deliveries and extracts
// what deduplication needs from them, for every supported sender.
//
// Almost every sender signs in one of a few ways (a Family); a sender is a
// Preset, a row of the preset table naming its family, headers, encoding,
// where its event id and type come from, how long results are kept and its
// endpoint handshake. Stripe, GitHub, Shopify, Standard Webhooks (as Svix
// sends them) and Slack are presets like the others, and WEBHOOK_PROVIDER=hmac
// describes one more through settings (HMACPresetFromEnv).
//
// It knows nothing of HTTP servers, Redis or AWS: a caller hands it a Request
// (raw body, lower-cased headers as API Gateway HTTP API payload v2.0
// delivers them, the public URL for URL-signing senders) and gets back either
// an error wrapping one of the sentinels below or a Delivery whose ID is the
// deduplication key. A typical request path:
//
//	v, err := webhook.New("stripe", secrets, 0) // once, at init
//	...
//	if err := v.Verify(r); err != nil {
//		// 401: every Verify error is a rejection
//	}
//	d, err := v.Event(r)
//	if err != nil {
//		// 400: ErrBadPayload or ErrNoEventID
//	}
//	if d.Handshake != nil {
//		// endpoint validation: answer with it, no deduplication
//	}
//
// The signing side lives in package webhooktest, beside this one as
// net/http/httptest sits beside net/http.
package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemlambda/idem/internal/apigw"
)

// DefaultTolerance is how far a signed timestamp may lie from the receiver's
// clock, in either direction, before a delivery is rejected. It is the window
// Stripe, Slack and Standard Webhooks document, and applies when New is given a
// zero tolerance.
const DefaultTolerance = 300 * time.Second

// BodyDigestPrefix starts the Event.ID of a sender whose signature covers the
// body only: "sha256:" and the hex SHA-256 of the body follow.
const BodyDigestPrefix = "sha256:"

// BodyDigestID returns the deduplication key of a body whose signature covers
// nothing else: BodyDigestPrefix and the hex SHA-256 of body. A body seen
// before has the same key whatever headers come with it, so a captured
// delivery re-sent under a fresh delivery id is a replay, not a new event; and
// the key is computed from bytes already at hand, with no extra store lookup.
func BodyDigestID(body []byte) string {
	sum := sha256.Sum256(body)
	return BodyDigestPrefix + hex.EncodeToString(sum[:])
}

// Errors returned by this package. Callers branch on them with errors.Is; the
// returned errors wrap them with detail that never includes a secret or a
// computed signature.
var (
	// ErrUnknownProvider is returned by New for a name Names does not list.
	ErrUnknownProvider = errors.New("webhook: unknown provider")
	// ErrNoSecret is returned by New when it is given no secret, or an empty one.
	ErrNoSecret = errors.New("webhook: no secret")
	// ErrInvalidSecret is returned by New for a secret the provider's scheme
	// cannot use (a Standard Webhooks secret that is not base64).
	ErrInvalidSecret = errors.New("webhook: invalid secret")
	// ErrInvalidTolerance is returned by New for a negative tolerance.
	ErrInvalidTolerance = errors.New("webhook: invalid tolerance")

	// ErrNotSigned means a header the scheme requires is missing or empty.
	ErrNotSigned = errors.New("webhook: not signed")
	// ErrInvalidHeader means a signature or timestamp header is malformed.
	ErrInvalidHeader = errors.New("webhook: invalid signature header")
	// ErrNoValidSignature means no signature in the headers matches the body
	// under any accepted secret.
	ErrNoValidSignature = errors.New("webhook: no valid signature")
	// ErrTooOld means the signed timestamp is further in the past than the
	// tolerance allows: a replay, or a delivery held back too long.
	ErrTooOld = errors.New("webhook: timestamp too old")
	// ErrTooNew means the signed timestamp is further in the future than the
	// tolerance allows.
	ErrTooNew = errors.New("webhook: timestamp too new")

	// ErrNoEventID means a verified delivery carries no deduplication key.
	ErrNoEventID = errors.New("webhook: no event id")
	// ErrBadPayload means the body is not the JSON object the sender sends.
	ErrBadPayload = errors.New("webhook: bad payload")
)

// New returns a verifier for the preset called name (Lookup), accepting a
// delivery signed with any of secrets (several at once during a rotation).
// tolerance, when positive, overrides the preset's. It returns an error
// wrapping ErrUnknownProvider for a name Lookup does not know; otherwise
// those of NewVerifier. The configurable verifier (HMACPresetName) is built
// with PresetFor and NewVerifier.
func New(name string, secrets []string, tolerance time.Duration) (*Verifier, error) {
	p, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownProvider, name, strings.Join(PresetNames(), ", "))
	}
	return NewVerifier(p, secrets, tolerance)
}

// Names lists every WEBHOOK_PROVIDER value PresetFor accepts: the preset
// names and HMACPresetName, sorted.
func Names() []string {
	return slices.Sorted(slices.Values(append(PresetNames(), HMACPresetName)))
}

// header returns the value of the header called name (lower-case), as apigw.Header finds it.
var header = apigw.Header

// maxQuoted bounds the request text an error message quotes: the errors of
// Verify and Event reach log lines, and request headers are the sender's (or
// an attacker's) to make as long as they like.
const maxQuoted = 256

// quote returns s as a Go-quoted string of at most maxQuoted bytes, followed,
// when it had to be cut, by a marker giving the full length.
func quote(s string) string {
	n := len(s)
	if n > maxQuoted {
		s = s[:maxQuoted]
	}
	q := strconv.Quote(s)
	if len(q) <= maxQuoted && n <= maxQuoted {
		return q
	}
	if len(q) > maxQuoted {
		q = q[:maxQuoted]
	}
	return q + "...(truncated, " + strconv.Itoa(n) + " bytes)"
}

// checkTolerance rejects a signed time further than tolerance from now.
func checkTolerance(signed, now time.Time, tolerance time.Duration) error {
	if d := now.Sub(signed); d > tolerance {
		return fmt.Errorf("%w: signed %s ago, tolerance %s", ErrTooOld, d.Truncate(time.Second), tolerance)
	}
	if d := signed.Sub(now); d > tolerance {
		return fmt.Errorf("%w: signed %s ahead, tolerance %s", ErrTooNew, d.Truncate(time.Second), tolerance)
	}
	return nil
}

// checkObject reports an error wrapping ErrBadPayload unless body is a JSON
// object. A member named twice is an error too: JSON parsers disagree on
// which one counts (encoding/json keeps the last, others the first), so the
// deduplication key and what a consumer reads could differ.
func checkObject(body []byte) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: body is not a JSON object", ErrBadPayload)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return fmt.Errorf("%w: %s", ErrBadPayload, quote(err.Error()))
	}
	// The map holds one entry per name decoded, as parsers see them ("id"
	// and "\u0069d" are one name): fewer entries than members is a repeat.
	members, err := countMembers(body)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBadPayload, quote(err.Error()))
	}
	if members != len(obj) {
		return fmt.Errorf("%w: the object names a member more than once (%d members, %d names)", ErrBadPayload, members, len(obj))
	}
	return nil
}

// countMembers counts the members of the JSON object body, a name given
// twice counted twice.
func countMembers(body []byte) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the opening brace
		return 0, err
	}
	members := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return 0, err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0, err
		}
		members++
	}
	return members, nil
}
