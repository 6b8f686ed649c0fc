package idemhttp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idemlambda/idem/pkg/idem"
)

// MaxKeyLength is the longest idempotency key accepted, in characters (bytes: keys are ASCII).
const MaxKeyLength = 255

// ErrMissingKey is what ParseKey's error matches (errors.Is) when the header is absent or blank.
// Every error of ParseKey, that one included, also matches idem.ErrInvalidKey.
var ErrMissingKey = errors.New("the idempotency-key header is required")

// keyError says why an idempotency-key header value was rejected.
type keyError struct {
	reason  string // e.g. "must be at most 255 characters, got 300"
	missing bool   // the header is absent or blank
}

func (e *keyError) Error() string {
	if e.missing {
		return ErrMissingKey.Error()
	}
	return "idempotency-key: " + e.reason
}

// Is makes every rejection match idem.ErrInvalidKey, and a missing key ErrMissingKey too.
func (e *keyError) Is(target error) bool {
	return target == idem.ErrInvalidKey || (e.missing && target == ErrMissingKey)
}

// ParseKey returns the key carried by an Idempotency-Key header value. Two forms mean the same
// key:
//
//   - bare, as Stripe's clients send it: abc-123;
//   - an RFC 8941 structured-field string, as the IETF draft "The Idempotency-Key HTTP Header
//     Field" writes it: "abc-123", where \" and \\ stand for " and \.
//
// A value that starts with a double quote is the second form and must be exactly one such
// string: no parameters and nothing else after the closing quote. Surrounding spaces and tabs
// are not part of the value (RFC 9110), so a bare key neither starts nor ends with a space; a
// quoted one may. The key itself is 1 to MaxKeyLength printable ASCII characters (0x20-0x7E).
// Every rejection matches idem.ErrInvalidKey (errors.Is); a blank value also ErrMissingKey.
func ParseKey(value string) (string, error) {
	value = strings.Trim(value, " \t")
	if value == "" {
		return "", &keyError{missing: true}
	}
	key := value
	if value[0] == '"' {
		var err error
		if key, err = parseSFString(value); err != nil {
			return "", err
		}
	}
	if key == "" {
		return "", &keyError{reason: "must not be empty"}
	}
	if len(key) > MaxKeyLength {
		return "", &keyError{reason: fmt.Sprintf("must be at most %d characters, got %d", MaxKeyLength, len(key))}
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return "", &keyError{reason: fmt.Sprintf("character %d is not printable ASCII", i+1)}
		}
	}
	return key, nil
}

// parseSFString parses s, which starts with a double quote, as exactly one RFC 8941 sf-string
// (section 4.2.5) and returns its content with the escapes resolved.
func parseSFString(s string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", &keyError{reason: `a quoted key may only escape " and \`}
			}
			b.WriteByte(s[i])
		case c == '"':
			if i != len(s)-1 {
				return "", &keyError{reason: "unexpected characters after the closing quote"}
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", &keyError{reason: fmt.Sprintf("character %d is not printable ASCII", i+1)}
		default:
			b.WriteByte(c)
		}
	}
	return "", &keyError{reason: "a quoted key lacks its closing quote"}
}
