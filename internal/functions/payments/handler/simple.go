package handler

// The bits of the members parseSimple has read.
const (
	seenAmount = 1 << iota
	seenCurrency
	seenDescription
	seenMetadata
)

// maxSimpleDigits is the most digits parseSimple reads as an amount: any 18 fit an int64.
const maxSimpleDigits = 18

// parseSimple reads, in one pass over its bytes and without encoding/json, a valid body of the
// shape nearly every request has: one JSON object whose members (in any order, each at most
// once) are
//
//	"amount": <1 to maxAmount, digits only>, "currency": "<accepted ISO 4217 code>",
//	"description"?: "<text>", "metadata"?: {"<key>": "<text>", ...}
//
// within the limits parseStrict checks, with JSON white space between tokens and strings of
// printable ASCII without escapes. ok is false for every other body, valid or not, which
// parseStrict then reads (and words the error of); a body parseSimple accepts, parseStrict
// accepts as the same request.
func parseSimple(body []byte, maxAmount int64) (r createRequest, ok bool) {
	s := simpleScanner{b: body}
	if !s.take('{') {
		return r, false
	}
	var seen uint8
	for {
		name, ok := s.str()
		if !ok || !s.take(':') {
			return r, false
		}
		bit, ok := r.simpleMember(&s, name, maxAmount)
		if !ok || seen&bit != 0 {
			return r, false
		}
		seen |= bit
		if s.take(',') {
			continue
		}
		if !s.take('}') {
			return r, false
		}
		break
	}
	s.space()
	return r, s.pos == len(s.b) && seen&(seenAmount|seenCurrency) == seenAmount|seenCurrency
}

// simpleMember reads the value of the member name into r and returns the member's bit; ok is
// false for an unknown name or a value parseSimple does not accept.
func (r *createRequest) simpleMember(s *simpleScanner, name []byte, maxAmount int64) (bit uint8, ok bool) {
	switch string(name) {
	case "amount":
		r.Amount, ok = s.amount(maxAmount)
		return seenAmount, ok
	case "currency":
		v, ok := s.str()
		if ok {
			r.Currency, ok = currencyCode(v)
		}
		return seenCurrency, ok
	case "description":
		v, ok := s.str()
		if !ok || len(v) > MaxDescriptionLength { // ASCII: a byte is a character
			return seenDescription, false
		}
		r.Description = string(v)
		return seenDescription, true
	case "metadata":
		r.Metadata, ok = s.metadata()
		return seenMetadata, ok
	}
	return 0, false
}

// simpleScanner reads the tokens parseSimple accepts from b, from pos on.
type simpleScanner struct {
	b   []byte
	pos int
}

// space skips JSON white space.
func (s *simpleScanner) space() {
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// take skips white space and then c, reporting whether c was there.
func (s *simpleScanner) take(c byte) bool {
	s.space()
	if s.pos < len(s.b) && s.b[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// str skips white space and reads a string of printable ASCII without escapes, returning its
// contents (a part of b).
func (s *simpleScanner) str() ([]byte, bool) {
	if !s.take('"') {
		return nil, false
	}
	start := s.pos
	for ; s.pos < len(s.b); s.pos++ {
		switch c := s.b[s.pos]; {
		case c == '"':
			s.pos++
			return s.b[start : s.pos-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// amount skips white space and reads an amount of 1 to maxAmount written in digits only, with
// no leading zero. A fraction or an exponent stops it before the '.' or 'e', where the caller's
// next token is not found.
func (s *simpleScanner) amount(maxAmount int64) (int64, bool) {
	s.space()
	start := s.pos
	var n int64
	for ; s.pos < len(s.b) && s.b[s.pos] >= '0' && s.b[s.pos] <= '9'; s.pos++ {
		if s.pos-start == maxSimpleDigits {
			return 0, false
		}
		n = n*10 + int64(s.b[s.pos]-'0')
	}
	if s.pos == start || s.b[start] == '0' || n > maxAmount {
		return 0, false
	}
	return n, true
}

// metadata skips white space and reads an object of at most MaxMetadataKeys string values
// under distinct keys of 1 to MaxMetadataKeyLength characters, each value at most
// MaxMetadataValueLength characters.
func (s *simpleScanner) metadata() (map[string]string, bool) {
	if !s.take('{') {
		return nil, false
	}
	m := make(map[string]string)
	if s.take('}') {
		return m, true
	}
	for {
		key, ok := s.str()
		if !ok || len(key) == 0 || len(key) > MaxMetadataKeyLength || !s.take(':') {
			return nil, false
		}
		value, ok := s.str()
		if !ok || len(value) > MaxMetadataValueLength || len(m) == MaxMetadataKeys {
			return nil, false
		}
		if _, dup := m[string(key)]; dup {
			return nil, false
		}
		m[string(key)] = string(value)
		if s.take(',') {
			continue
		}
		return m, s.take('}')
	}
}
