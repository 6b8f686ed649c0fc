package handler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemlambda/idem/pkg/idem"
)

// Limits of the optional fields of a create request, the same as Stripe's for metadata.
const (
	// MaxDescriptionLength is the longest description, in characters.
	MaxDescriptionLength = 1000
	// MaxMetadataKeys is the largest number of metadata entries.
	MaxMetadataKeys = 50
	// MaxMetadataKeyLength is the longest metadata key, in characters.
	MaxMetadataKeyLength = 40
	// MaxMetadataValueLength is the longest metadata value, in characters.
	MaxMetadataValueLength = 500
)

// createRequest is the validated body of POST /payments. Its JSON encoding, with currency
// upper-cased and empty optional fields left out, is the canonical form the fingerprint is taken
// over: key order, white space, currency case, and an empty description or metadata object
// versus none never make two requests differ.
type createRequest struct {
	// Amount is in minor units of Currency: 1 to the configured maximum.
	Amount int64 `json:"amount"`
	// Currency is an ISO 4217 code, upper case.
	Currency string `json:"currency"`
	// Description is optional free text, at most MaxDescriptionLength characters.
	Description string `json:"description,omitempty"`
	// Metadata is optional: at most MaxMetadataKeys string values under keys of 1 to
	// MaxMetadataKeyLength characters, each value at most MaxMetadataValueLength characters.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// fingerprint returns the fingerprint of the canonical form of r.
func (r createRequest) fingerprint() (idem.Fingerprint, error) {
	if r.Description == "" && len(r.Metadata) == 0 && plainCurrency(r.Currency) {
		// {"amount":N,"currency":"XYZ"} is what json.Marshal writes for r, and already in the
		// form FingerprintJSON hashes (keys sorted, no white space, a plain string): written
		// here on the stack, it is hashed as it stands.
		var buf [64]byte
		b := append(buf[:0], `{"amount":`...)
		b = strconv.AppendInt(b, r.Amount, 10)
		b = append(b, `,"currency":"`...)
		b = append(b, r.Currency...)
		b = append(b, `"}`...)
		return idem.FingerprintOf(b), nil
	}
	return r.fingerprintOfEncoding()
}

// plainCurrency reports whether s is three upper-case ASCII letters, as currencyCode returns
// every code: written by json.Marshal as it stands.
func plainCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range 3 {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// fingerprintOfEncoding is fingerprint by its definition: FingerprintJSON of r's JSON encoding.
func (r createRequest) fingerprintOfEncoding() (idem.Fingerprint, error) {
	canonical, err := json.Marshal(r)
	if err != nil {
		return idem.Fingerprint{}, fmt.Errorf("encode request: %w", err)
	}
	fp, err := idem.FingerprintJSON(canonical)
	if err != nil {
		return idem.Fingerprint{}, fmt.Errorf("fingerprint request: %w", err)
	}
	return fp, nil
}

// inputError says which part of a request body is wrong. Its message starts with the field.
type inputError struct {
	field  string // as shown to the caller: amount, metadata["k"], "unknown" (quoted), body
	reason string
}

func (e *inputError) Error() string { return e.field + ": " + e.reason }

func fieldError(field, format string, args ...any) error {
	return &inputError{field: field, reason: fmt.Sprintf(format, args...)}
}

// parseCreateRequest parses and validates the body of POST /payments:
//
//	{"amount": <integer, 1..maxAmount>, "currency": "<ISO 4217>",
//	 "description"?: "<text>", "metadata"?: {"<key>": "<text>", ...}}
//
// It is strict: the body must be one JSON object in valid UTF-8 with nothing after it; unknown
// and repeated fields, null, values of the wrong type, and an amount written with a fraction or
// exponent (1.0, 1e2) are errors. Every error is an *inputError naming the field.
//
// The common body (see parseSimple) is read in one pass over its bytes; any other, and every
// invalid one, by parseStrict, which words the errors.
func parseCreateRequest(body []byte, maxAmount int64) (createRequest, error) {
	if r, ok := parseSimple(body, maxAmount); ok {
		return r, nil
	}
	return parseStrict(body, maxAmount)
}

// parseStrict is parseCreateRequest by way of encoding/json: the whole body checked, then
// read token by token.
func parseStrict(body []byte, maxAmount int64) (createRequest, error) {
	var r createRequest
	if err := checkWholeBody(body); err != nil {
		return r, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := expectDelim(dec, '{', "body", "a JSON object"); err != nil {
		return r, err
	}
	seen := make(map[string]bool, 4)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return r, syntaxError(err)
		}
		name, _ := tok.(string) // object keys are always strings
		if seen[name] {
			return r, fieldError(displayName(name), "appears more than once")
		}
		seen[name] = true
		if err := r.decodeField(dec, name, maxAmount); err != nil {
			return r, err
		}
	}
	if err := expectEndOfBody(dec); err != nil {
		return r, err
	}
	switch {
	case !seen["amount"]:
		return r, fieldError("amount", "required (an integer number of minor units)")
	case !seen["currency"]:
		return r, fieldError("currency", "required (an ISO 4217 code such as EUR)")
	}
	return r, nil
}

// checkWholeBody refuses a body that is empty, not UTF-8 or not JSON, before any field is read.
func checkWholeBody(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fieldError("body", "required: a JSON object with amount and currency")
	}
	if !utf8.Valid(body) {
		return fieldError("body", "not valid UTF-8")
	}
	// The whole body first: a token stream reads {"amount":012} as the number 0 before it
	// meets the 1, and would answer "must be greater than 0" for a syntax error.
	if !json.Valid(body) {
		var v json.RawMessage
		return syntaxError(json.Unmarshal(body, &v))
	}
	return nil
}

// decodeField reads the value of the field name into r; an unknown name is an error.
func (r *createRequest) decodeField(dec *json.Decoder, name string, maxAmount int64) error {
	var err error
	switch name {
	case "amount":
		r.Amount, err = parseAmount(dec, maxAmount)
	case "currency":
		r.Currency, err = parseCurrency(dec)
	case "description":
		r.Description, err = stringValue(dec, "description", MaxDescriptionLength)
	case "metadata":
		r.Metadata, err = parseMetadata(dec)
	default:
		err = fieldError(displayName(name), "unknown field (accepted: amount, currency, description, metadata)")
	}
	return err
}

// expectEndOfBody reads the object's closing brace and then requires the end of the body.
func expectEndOfBody(dec *json.Decoder) error {
	if _, err := dec.Token(); err != nil { // the closing brace
		return syntaxError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fieldError("body", "unexpected data after the JSON object")
	}
	return nil
}

func parseAmount(dec *json.Decoder, maxAmount int64) (int64, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, syntaxError(err)
	}
	num, ok := tok.(json.Number)
	if !ok {
		return 0, fieldError("amount", "must be an integer number of minor units, got %s", kindOf(tok))
	}
	s := num.String()
	switch {
	case strings.ContainsAny(s, ".eE"):
		return 0, fieldError("amount", "must be an integer number of minor units, not %s", clip(s, 32))
	case strings.HasPrefix(s, "-"):
		return 0, fieldError("amount", "must be greater than 0")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil || n > maxAmount: // the decoder checked the syntax: err is overflow
		return 0, fieldError("amount", "must be at most %d", maxAmount)
	case n == 0:
		return 0, fieldError("amount", "must be greater than 0")
	}
	return n, nil
}

func parseCurrency(dec *json.Decoder) (string, error) {
	s, err := stringValue(dec, "currency", 0)
	if err != nil {
		return "", err
	}
	code, ok := currencyCode(s)
	if !ok {
		return "", fieldError("currency", "%s is not an ISO 4217 currency code", strconv.Quote(clip(s, 16)))
	}
	return code, nil
}

func parseMetadata(dec *json.Decoder) (map[string]string, error) {
	if err := expectDelim(dec, '{', "metadata", "an object of strings"); err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		key, _ := tok.(string)
		field := "metadata[" + strconv.Quote(clip(key, 64)) + "]"
		switch n := utf8.RuneCountInString(key); {
		case n == 0:
			return nil, fieldError("metadata", "keys must not be empty")
		case n > MaxMetadataKeyLength:
			return nil, fieldError(field, "key longer than %d characters", MaxMetadataKeyLength)
		}
		if _, dup := m[key]; dup {
			return nil, fieldError(field, "appears more than once")
		}
		if len(m) == MaxMetadataKeys {
			return nil, fieldError("metadata", "at most %d entries", MaxMetadataKeys)
		}
		if m[key], err = stringValue(dec, field, MaxMetadataValueLength); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxError(err)
	}
	return m, nil
}

// stringValue reads a string value of field, at most maxLen characters (0: no limit).
func stringValue(dec *json.Decoder, field string, maxLen int) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", syntaxError(err)
	}
	s, ok := tok.(string)
	if !ok {
		return "", fieldError(field, "must be a string, got %s", kindOf(tok))
	}
	if maxLen > 0 && utf8.RuneCountInString(s) > maxLen {
		return "", fieldError(field, "must be at most %d characters", maxLen)
	}
	return s, nil
}

// expectDelim reads the opening delimiter of a value of field that must be what.
func expectDelim(dec *json.Decoder, want json.Delim, field, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fieldError(field, "must be %s, got %s", what, kindOf(tok))
	}
	return nil
}

// syntaxError reports a body that is not well-formed JSON.
func syntaxError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fieldError("body", "not valid JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fieldError("body", "not valid JSON: unexpected end of input")
	}
	return fieldError("body", "not valid JSON: %v", err)
}

// kindOf names the JSON type of the token that starts a value.
func kindOf(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// displayName shows an unknown or repeated field name; known names are shown as they are.
func displayName(name string) string {
	switch name {
	case "amount", "currency", "description", "metadata":
		return name
	}
	return strconv.Quote(clip(name, 64))
}

// clip shortens s to at most n bytes, on a rune boundary, so messages never echo a whole body.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
