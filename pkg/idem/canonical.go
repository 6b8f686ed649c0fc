package idem

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"unicode/utf8"
)

// canonical writes the canonical form FingerprintJSON hashes without building the decoded value:
// the bytes json.Marshal writes for what a json.Decoder with UseNumber decodes from a payload
// (object keys sorted, the last of repeated keys kept, numbers as written, strings as Marshal
// escapes them). A string or key with an escape, HTML-sensitive or non-ASCII-safe character is
// decoded and encoded by encoding/json itself, so the bytes are the same as the decoded value's
// by construction; anything else is copied. It only reads payloads json.Valid accepts.
type canonical struct {
	src     []byte
	pos     int
	out     []byte
	scratch []byte   // where an object's members are put in order before they replace it in out
	members []member // the members of the objects being read, innermost last
}

// member is an object member: its key as decoded and where its value's canonical bytes sit in
// out.
type member struct {
	key        []byte
	start, end int
}

var canonicalPool = sync.Pool{New: func() any { return new(canonical) }}

// fingerprintCanonical returns the fingerprint of payload's canonical form, and false when the
// payload is not one JSON value, or with fields is not an object, for FingerprintJSON to answer
// (and word the error) its own way.
func fingerprintCanonical(payload []byte, fields []string) (Fingerprint, bool) {
	if !json.Valid(payload) {
		return Fingerprint{}, false
	}
	c := canonicalPool.Get().(*canonical)
	defer func() {
		c.src, c.members = nil, c.members[:0]
		canonicalPool.Put(c)
	}()
	c.src, c.pos, c.out = payload, 0, c.out[:0]
	c.skipSpace()
	if len(fields) > 0 {
		if c.src[c.pos] != '{' {
			return Fingerprint{}, false
		}
		c.object(fields)
	} else {
		c.value()
	}
	return FingerprintOf(c.out), true
}

func (c *canonical) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at c.pos.
func (c *canonical) value() {
	c.skipSpace()
	switch ch := c.src[c.pos]; {
	case ch == '{':
		c.object(nil)
	case ch == '[':
		c.array()
	case ch == '"':
		c.out = c.appendString(c.out)
	default: // a number, true, false or null: written as it stands
		start := c.pos
		for c.pos < len(c.src) && !isDelimiter(c.src[c.pos]) {
			c.pos++
		}
		c.out = append(c.out, c.src[start:c.pos]...)
	}
}

// isDelimiter reports whether b ends a number or a literal.
func isDelimiter(b byte) bool {
	switch b {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func (c *canonical) array() {
	c.pos++ // [
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.src[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return
	}
	for {
		c.value()
		c.skipSpace()
		ch := c.src[c.pos]
		c.pos++
		if ch == ']' {
			c.out = append(c.out, ']')
			return
		}
		c.out = append(c.out, ',')
	}
}

// object appends the canonical form of the object at c.pos, of only the members named in
// fields when there are any.
func (c *canonical) object(fields []string) {
	c.pos++ // {
	base, start := len(c.members), len(c.out)
	c.skipSpace()
	for c.src[c.pos] != '}' {
		key := c.key()
		c.skipSpace()
		c.pos++ // :
		from := len(c.out)
		c.value()
		c.members = append(c.members, member{key: key, start: from, end: len(c.out)})
		c.skipSpace()
		if c.src[c.pos] == ',' {
			c.pos++
			c.skipSpace()
		}
	}
	c.pos++ // }

	ms := c.members[base:]
	// Sorted by key, repeated keys in the order written: the last of each is the one decoded.
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	c.scratch = append(c.scratch[:0], '{')
	first := true
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(ms[i+1].key, m.key) {
			continue
		}
		if fields != nil && !selected(fields, m.key) {
			continue
		}
		if !first {
			c.scratch = append(c.scratch, ',')
		}
		first = false
		c.scratch = appendKey(c.scratch, m.key)
		c.scratch = append(c.scratch, ':')
		c.scratch = append(c.scratch, c.out[m.start:m.end]...)
	}
	c.scratch = append(c.scratch, '}')
	c.out = append(c.out[:start], c.scratch...)
	c.members = c.members[:base]
}

// selected reports whether key is one of fields.
func selected(fields []string, key []byte) bool {
	for _, f := range fields {
		if f == string(key) {
			return true
		}
	}
	return false
}

// key reads the member name at c.pos and returns it decoded.
func (c *canonical) key() []byte {
	start := c.pos
	end, plain := c.stringEnd()
	c.pos = end
	if plain {
		return c.src[start+1 : end-1]
	}
	var s string
	_ = json.Unmarshal(c.src[start:end], &s) // valid: the payload is
	return []byte(s)
}

// appendKey appends a decoded key as json.Marshal writes a map's key.
func appendKey(dst, key []byte) []byte {
	if plainString(key) {
		dst = append(dst, '"')
		dst = append(dst, key...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(string(key))
	return append(dst, b...)
}

// appendString appends the canonical form of the string at c.pos.
func (c *canonical) appendString(dst []byte) []byte {
	start := c.pos
	end, plain := c.stringEnd()
	c.pos = end
	if plain {
		return append(dst, c.src[start:end]...)
	}
	var s string
	_ = json.Unmarshal(c.src[start:end], &s)
	b, _ := json.Marshal(s)
	return append(dst, b...)
}

// stringEnd returns the offset just past the string starting at c.pos, and whether its contents
// are plain: written by json.Marshal exactly as they stand in the source.
func (c *canonical) stringEnd() (int, bool) {
	i := c.pos + 1
	for c.src[i] != '"' {
		if c.src[i] == '\\' {
			i += 2
			for c.src[i] != '"' {
				if c.src[i] == '\\' {
					i++
				}
				i++
			}
			return i + 1, false
		}
		i++
	}
	return i + 1, plainString(c.src[c.pos+1 : i])
}

// plainString reports whether json.Marshal writes s (a decoded string) unchanged between its
// quotes: no character it escapes (control characters, quote, backslash, <, >, &, U+2028,
// U+2029) and valid UTF-8.
func plainString(s []byte) bool {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b < 0x20 || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += size
	}
	return true
}
