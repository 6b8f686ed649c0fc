// Package webhook verifies the signatures of webhook deliveries and extracts
// what deduplication needs from them, for each supported sender: Stripe,
// GitHub, Shopify, Standard Webhooks (as Svix sends them) and Slack.
//
// It knows nothing of HTTP servers, Redis or AWS: a caller hands it the raw
// body and the request headers (names lower-cased, as API Gateway HTTP API
// payload v2.0 delivers them), and gets back either an error wrapping one of
// the sentinels below or an [Event] whose ID is the deduplication key.
//
// A typical request path:
//
//	p, err := webhook.New("stripe", secrets, 0) // once, at init
//	...
//	if err := p.Verify(headers, body, time.Now()); err != nil {
//		// 401: every Verify error is a rejection
//	}
//	ev, err := p.Event(headers, body)
//	if err != nil {
//		// 400: ErrBadPayload or ErrNoEventID
//	}
//	if ev.Challenge != "" {
//		// Slack URL verification: answer with the challenge, no deduplication
//	}
//
// Every provider also ships the signing side ([Provider.Sign] and one exported
// signing function per provider), so tests and local tools can produce
// deliveries that the verifier accepts exactly as it accepts the sender's.
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultTolerance is how far a signed timestamp may lie from the receiver's
// clock, in either direction, before a delivery is rejected. It is the window
// Stripe, Slack and Standard Webhooks document, and applies when New is given a
// zero tolerance.
const DefaultTolerance = 300 * time.Second

// Provider verifies one sender's deliveries and extracts what deduplication
// needs. Implementations are safe for concurrent use.
type Provider interface {
	// Name is the provider's registry name: "stripe", "github", "shopify",
	// "standard" or "slack".
	Name() string

	// Verify checks the signature over the raw body against every accepted
	// secret. headers have lower-cased names (API Gateway v2); now is the
	// receiver's clock, used for the timestamp tolerance. It returns nil, or
	// an error wrapping ErrNotSigned, ErrInvalidHeader, ErrNoValidSignature,
	// ErrTooOld or ErrTooNew; any of them means the delivery must be rejected.
	Verify(headers map[string]string, body []byte, now time.Time) error

	// Event extracts the deduplication key and metadata from a delivery that
	// Verify accepted. Errors wrap ErrBadPayload (the body is not the JSON
	// the sender sends) or ErrNoEventID (no deduplication key).
	Event(headers map[string]string, body []byte) (Event, error)

	// DefaultResultTTL is how long a completed result must be kept so that it
	// outlives every retry the sender can still make.
	DefaultResultTTL() time.Duration

	// Sign returns the signature headers a genuine sender would attach to
	// body at time now when signing with secret. It is meant for tests, local
	// senders and sample generation; secret need not be one New was given.
	Sign(secret string, body []byte, now time.Time) map[string]string

	// Sample returns a realistic delivery body for eventID, sent at now, and
	// the headers other than the signature that the sender sets with it
	// (delivery id, event type, content type). Merged with Sign's headers, in
	// either order, it makes a delivery that Verify and Event accept and whose
	// Event.ID is eventID, or, for a sender whose signature does not cover
	// its id (Event.DeliveryID set), whose Event.DeliveryID is eventID.
	Sample(eventID string, now time.Time) (body []byte, headers map[string]string)
}

// Event is what deduplication and routing need from a verified delivery.
type Event struct {
	// ID is the deduplication key, the same for every retry of one event and
	// always derived from signed bytes, so that no header an attacker can
	// change makes a captured delivery look new. It is the event id the
	// signature covers (Stripe's and Slack's id in the body, Standard
	// Webhooks' webhook-id) or, for senders whose signature covers the body
	// only (GitHub, Shopify), BodyDigestPrefix followed by the hex SHA-256 of
	// the body.
	ID string
	// DeliveryID is the sender's own id for the delivery when the signature
	// does not cover it and it is therefore not ID: GitHub's
	// x-github-delivery, Shopify's x-shopify-webhook-id (or
	// x-shopify-event-id). It is empty when ID is the sender's id.
	DeliveryID string
	// Type is the event type: Stripe's and Standard Webhooks' body type,
	// GitHub's x-github-event, Shopify's x-shopify-topic, Slack's event.type.
	Type string
	// ObjectID identifies the object the event is about, when the delivery
	// says so (Stripe data.object.id, GitHub repository full name, Shopify
	// resource id, Slack team and channel). It suits SQS FIFO message groups.
	// It may be empty.
	ObjectID string
	// Unsigned is the set of fields above whose values come from request
	// headers the signature does not cover (GitHub's and Shopify's delivery
	// id and type). Anyone who captured a delivery can change them, so a
	// consumer must not rely on them for anything the body does not confirm.
	Unsigned Fields
	// Challenge is set only for a Slack url_verification request: the caller
	// answers with it and deduplicates nothing. ID is then empty.
	Challenge string
}

// Fields is a set of Event fields, as Event.Unsigned reports them.
type Fields uint8

// The Event fields a Fields set can name.
const (
	// FieldDeliveryID is Event.DeliveryID.
	FieldDeliveryID Fields = 1 << iota
	// FieldType is Event.Type.
	FieldType
	// FieldObjectID is Event.ObjectID.
	FieldObjectID
)

// fieldNames are the names Fields.Names reports, in the order of the bits.
var fieldNames = [...]string{"delivery_id", "type", "object_id"}

// Names returns the snake_case names of the fields in f ("delivery_id",
// "type", "object_id"), in that order; nil for the empty set.
func (f Fields) Names() []string {
	var names []string
	for i, name := range fieldNames {
		if f&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return names
}

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

// config is what every provider is built from.
type config struct {
	secrets   []string
	tolerance time.Duration
}

var registry = map[string]func(config) (Provider, error){
	"github":   newGitHub,
	"shopify":  newShopify,
	"slack":    newSlack,
	"standard": newStandard,
	"stripe":   newStripe,
}

// New returns the named provider, accepting a delivery signed with any of
// secrets (several at once during a rotation). tolerance bounds the distance
// between a signed timestamp and the receiver's clock, in both directions; 0
// means DefaultTolerance. Providers whose scheme signs no timestamp (github,
// shopify) ignore it.
//
// New returns an error wrapping ErrUnknownProvider for a name Names does not
// list, ErrNoSecret when secrets is empty or holds an empty string,
// ErrInvalidSecret for a secret the scheme cannot use, and ErrInvalidTolerance
// for a negative tolerance.
func New(name string, secrets []string, tolerance time.Duration) (Provider, error) {
	build, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownProvider, name, strings.Join(Names(), ", "))
	}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w for %s", ErrNoSecret, name)
	}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("%w for %s: secret %d is empty", ErrNoSecret, name, i+1)
		}
	}
	if tolerance < 0 {
		return nil, fmt.Errorf("%w: %s is negative", ErrInvalidTolerance, tolerance)
	}
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	return build(config{secrets: slices.Clone(secrets), tolerance: tolerance})
}

// Names lists the provider names New accepts, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(registry))
}

// header returns the value of the header called name (lower-case). API
// Gateway v2 lower-cases names already; a caller that did not is still served.
func header(headers map[string]string, name string) string {
	if v, ok := headers[name]; ok {
		return v
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

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

// hmacSHA256 returns HMAC-SHA256(key, parts joined without separator).
func hmacSHA256(key []byte, parts ...[]byte) []byte {
	mac := hmac.New(sha256.New, key)
	for _, p := range parts {
		mac.Write(p)
	}
	return mac.Sum(nil)
}

// macHexLen and macBase64Len are the encoded lengths of an HMAC-SHA256 tag.
const (
	macHexLen    = 2 * sha256.Size
	macBase64Len = (sha256.Size + 2) / 3 * 4
)

// decodeHexMAC decodes a hex HMAC-SHA256 tag (either case), or reports false.
func decodeHexMAC(s string) ([]byte, bool) {
	if len(s) != macHexLen {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// decodeBase64MAC decodes a padded standard-base64 HMAC-SHA256 tag, or reports
// false. Only the canonical encoding passes: the length check excludes the
// line breaks the decoder would otherwise skip, Strict the stray low bits.
func decodeBase64MAC(s string) ([]byte, bool) {
	if len(s) != macBase64Len {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	return b, err == nil && len(b) == sha256.Size
}

// parseTimestamp parses a signed Unix timestamp in seconds. Only canonical
// decimal passes (no sign, no leading zero), so the string the sender signed
// and the number checked against the tolerance cannot disagree.
func parseTimestamp(s string) (time.Time, bool) {
	if s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
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

// unixString formats t as the decimal Unix seconds senders put in headers.
func unixString(t time.Time) string {
	return strconv.FormatInt(t.Unix(), 10)
}

// jsonObject is a decoded JSON object whose members are decoded on demand.
type jsonObject map[string]json.RawMessage

// decodeObject decodes body as a JSON object, or returns an error wrapping
// ErrBadPayload. A member named twice is an error too: JSON parsers disagree
// on which one counts (encoding/json keeps the last, others the first), so
// the deduplication key and what a consumer reads could differ.
func decodeObject(body []byte) (jsonObject, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrBadPayload)
	}
	var obj jsonObject
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadPayload, quote(err.Error()))
	}
	if err := uniqueMembers(body, len(obj)); err != nil {
		return nil, err
	}
	return obj, nil
}

// uniqueMembers reports an error wrapping ErrBadPayload when the JSON object
// body, already known to be valid with n distinct member names, names a
// member twice. Names are compared decoded, as parsers see them: "id" and
// "\u0069d" are the same member.
func uniqueMembers(body []byte, n int) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the opening brace
		return fmt.Errorf("%w: %s", ErrBadPayload, quote(err.Error()))
	}
	members := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("%w: %s", ErrBadPayload, quote(err.Error()))
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("%w: %s", ErrBadPayload, quote(err.Error()))
		}
		members++
	}
	if members != n {
		return fmt.Errorf("%w: the object names a member more than once (%d members, %d names)", ErrBadPayload, members, n)
	}
	return nil
}

// str returns the member key when it is a JSON string, else "".
func (o jsonObject) str(key string) string {
	raw, ok := o[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// idString returns the member key when it is a JSON string, else "". A string
// that is not valid UTF-8, or holds an escaped surrogate that is not half of
// a pair (as "\ud800" alone), is an error wrapping ErrBadPayload: decoding
// would turn each bad sequence into U+FFFD, so distinct ids would share one
// deduplication key while their raw bytes still reached the consumer.
func (o jsonObject) idString(key string) (string, error) {
	raw, ok := o[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", nil
	}
	if !utf8.Valid(raw) || !pairedSurrogates(raw) {
		return "", fmt.Errorf("%w: %s is not valid UTF-8 text", ErrBadPayload, key)
	}
	return o.str(key), nil
}

// pairedSurrogates reports whether every \u escape of a UTF-16 surrogate in
// the JSON string literal s is a high surrogate directly followed by an
// escaped low one.
func pairedSurrogates(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		i++
		if i >= len(s) || s[i] != 'u' {
			continue // a one-character escape; i now skips it
		}
		r, ok := hexRune(s[i+1:])
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return false // a low surrogate with no high one before it
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
				return false
			}
			low, ok := hexRune(s[i+3:])
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

// hexRune decodes the four hex digits that start b.
func hexRune(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}

// obj returns the member key when it is a JSON object, else nil.
func (o jsonObject) obj(key string) jsonObject {
	raw, ok := o[key]
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var sub jsonObject
	if json.Unmarshal(raw, &sub) != nil {
		return nil
	}
	return sub
}

// id returns the member key when it is a JSON string or number, as text.
// Numbers keep their exact digits: Shopify ids exceed float64 precision.
func (o jsonObject) id(key string) string {
	raw, ok := o[key]
	if !ok || len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		return o.str(key)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return ""
	}
	return n.String()
}

// derivedID returns a stable identifier made from seed: prefix followed by
// n hex characters of its SHA-256. Samples use it so that one event id always
// yields the same object ids.
func derivedID(prefix, seed string, n int) string {
	sum := sha256.Sum256([]byte(seed))
	return prefix + hex.EncodeToString(sum[:])[:n]
}

// derivedUUID is derivedID shaped as a version 4 UUID.
func derivedUUID(seed string) string {
	h := derivedID("", seed, 32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// derivedNumber is derivedID for senders whose ids are decimal numbers.
func derivedNumber(seed string, digits int) string {
	sum := sha256.Sum256([]byte(seed))
	var b strings.Builder
	b.WriteByte('1' + sum[0]%9)
	for i := 1; i < digits; i++ {
		b.WriteByte('0' + sum[i%len(sum)]%10)
	}
	return b.String()
}

// mustJSON encodes a sample body; samples are built from plain values, so a
// failure is a programming error.
func mustJSON(v any, indent bool) []byte {
	var (
		b   []byte
		err error
	)
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		panic("webhook: sample body: " + err.Error())
	}
	return b
}
