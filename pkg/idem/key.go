package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// MaxIDLength is the longest idempotency key ID accepted, in bytes.
const MaxIDLength = 1024

// maxScopeLength is the longest scope accepted, in bytes.
const maxScopeLength = 64

// Key names one unit of work: a Scope (a provider, a tenant, a route) and the caller's ID
// within it. The ID never reaches Redis as such; only its SHA-256 does.
type Key struct {
	// Scope is 1 to 64 characters from [A-Za-z0-9._:-].
	Scope string
	// ID is 1 to MaxIDLength bytes of printable text: no ASCII control characters.
	ID string
}

// Validate reports why k cannot be used (an error matching ErrInvalidKey), or nil. Do calls it
// before sending anything.
func (k Key) Validate() error {
	if k.Scope == "" || len(k.Scope) > maxScopeLength {
		return fmt.Errorf("%w: scope must be 1 to %d bytes", ErrInvalidKey, maxScopeLength)
	}
	for i := 0; i < len(k.Scope); i++ {
		if !scopeByte(k.Scope[i]) {
			return fmt.Errorf("%w: scope byte %d is not one of [A-Za-z0-9._:-]", ErrInvalidKey, i)
		}
	}
	if k.ID == "" || len(k.ID) > MaxIDLength {
		return fmt.Errorf("%w: id must be 1 to %d bytes", ErrInvalidKey, MaxIDLength)
	}
	for i := 0; i < len(k.ID); i++ {
		if c := k.ID[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: id byte %d is a control character", ErrInvalidKey, i)
		}
	}
	return nil
}

func scopeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

// redisKey returns <prefix>:{<scope>:<hex sha256(id)>}. The braces are a Redis Cluster hash
// tag: the whole name is hashed, so any later key derived from the same tag lands in the same
// slot.
func (k Key) redisKey(prefix string) string {
	sum := sha256.Sum256([]byte(k.ID))
	var b strings.Builder
	b.Grow(len(prefix) + len(k.Scope) + 4 + 2*sha256.Size)
	b.WriteString(prefix)
	b.WriteString(":{")
	b.WriteString(k.Scope)
	b.WriteByte(':')
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	b.Write(hexSum[:])
	b.WriteByte('}')
	return b.String()
}

// JoinID joins parts into one unambiguous ID by prefixing each with its length, so that
// ("a b", "c") and ("a", "b c") never collide. Use it to scope a caller's key to a principal.
func JoinID(parts ...string) string {
	var b strings.Builder
	n := len(parts)
	for _, p := range parts {
		n += len(p) + 4 // the length's digits, for any part under 10,000 bytes, and its colon
	}
	b.Grow(n)
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}
