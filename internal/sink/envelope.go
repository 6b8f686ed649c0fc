package sink

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// DecodeEnvelope decodes data, a message body or an entry's detail, into an Envelope: the
// Envelope json.Unmarshal decodes, and its error when json.Unmarshal fails (wrapped).
//
// An envelope in the form the sinks write (compact, each member once, by its exact name, with
// strings that need no unescaping) is read in one pass, without reflection, its strings sharing
// one copy of the metadata's bytes; anything else goes through json.Unmarshal. Either way the
// Payload may share data's bytes rather than copy them: data must not change while the
// Envelope is in use.
func DecodeEnvelope(data []byte) (Envelope, error) {
	e, _, err := ReadEnvelope(data)
	return e, err
}

// ReadEnvelope is DecodeEnvelope, and reports whether data was in the sinks' form. Then each
// member of the Envelope came from the one member of data of its exact name: data's members
// "provider", "id" and "payload" are the Envelope's Provider, ID and Payload (a nil Payload
// meaning no such member), as a selection of data's members by name (idem.FingerprintJSON's)
// finds them. Outside that form json.Unmarshal also matches names regardless of case and takes
// the last of repeated members.
func ReadEnvelope(data []byte) (e Envelope, sinkForm bool, err error) {
	if e, ok := decodeCompact(data); ok {
		return e, true, nil
	}
	return unmarshalEnvelope(data)
}

// unmarshalEnvelope is ReadEnvelope outside the sinks' form. (Its own function, so that the
// Envelope json.Unmarshal needs on the heap is allocated only here.)
func unmarshalEnvelope(data []byte) (Envelope, bool, error) {
	e := new(Envelope)
	if err := json.Unmarshal(data, e); err != nil {
		return Envelope{}, false, fmt.Errorf("sink: decode envelope: %w", err)
	}
	return *e, false, nil
}

// The members of an envelope, as the sinks name them.
const (
	memberProvider = iota
	memberID
	memberDeliveryID
	memberType
	memberObjectID
	memberReceivedAt
	memberSigned
	memberUnsigned
	memberPayload
	memberPayloadRef
	envelopeMembers
)

// The members of a payload_ref.
const (
	refBucket = iota
	refKey
	refBytes
	refSHA256
	refMembers
)

// span is where a member's value sits in the data: [start, end).
type span struct{ start, end int }

// maxCompactDepth is how deeply a payload may nest for the compact reader; deeper ones go to
// json.Unmarshal, which has its own limit.
const maxCompactDepth = 512

// compact reads an envelope the way the sinks write it. It first checks the whole document,
// recording where each member's value is, then builds the Envelope from those spans; any
// deviation from the form it knows makes it give up (ok false), never guess.
type compact struct {
	data  []byte
	pos   int
	seen  [envelopeMembers]bool
	spans [envelopeMembers]span
	ref   [refMembers]span
	refs  [refMembers]bool
	// before and after are the bytes before and after the payload as strings, made when a
	// decoded string first needs them: the metadata's strings are substrings of these.
	before, after string
	madeB, madeA  bool
}

// decodeCompact decodes data when it is an envelope in the sinks' form.
func decodeCompact(data []byte) (Envelope, bool) {
	c := compact{data: data}
	if !c.document() {
		return Envelope{}, false
	}
	return c.envelope()
}

// document checks data: one object of known, distinct members, and nothing after it.
func (c *compact) document() bool {
	if !c.next('{') {
		return false
	}
	if c.next('}') {
		return c.pos == len(c.data)
	}
	for {
		m, ok := c.member(envelopeNames[:], c.seen[:])
		if !ok || !c.value(m) {
			return false
		}
		if c.next('}') {
			return c.pos == len(c.data)
		}
		if !c.next(',') {
			return false
		}
	}
}

// envelopeNames and refNames are the members' names by index, as json tags name them.
var (
	envelopeNames = [envelopeMembers]string{"provider", "id", "delivery_id", "type", "object_id", "received_at",
		"signed", "unsigned", "payload", "payload_ref"}
	refNames = [refMembers]string{"bucket", "key", "bytes", "sha256"}
)

// next consumes b if it is the next byte.
func (c *compact) next(b byte) bool {
	if c.pos < len(c.data) && c.data[c.pos] == b {
		c.pos++
		return true
	}
	return false
}

// member reads `"name":` for one of names not yet seen, and marks it seen.
func (c *compact) member(names []string, seen []bool) (int, bool) {
	s, ok := c.plain()
	if !ok || !c.next(':') {
		return 0, false
	}
	key := c.data[s.start+1 : s.end-1]
	for i, name := range names {
		if name == string(key) {
			if seen[i] {
				return 0, false
			}
			seen[i] = true
			return i, true
		}
	}
	return 0, false
}

// value reads member m's value and records its span.
func (c *compact) value(m int) bool {
	start := c.pos
	var ok bool
	switch m {
	case memberSigned, memberUnsigned:
		ok = c.null() || c.strings()
	case memberPayload:
		ok = c.any(0)
	case memberPayloadRef:
		ok = c.null() || c.payloadRef()
	default:
		_, ok = c.plain()
	}
	c.spans[m] = span{start, c.pos}
	return ok
}

// plain reads a string that decodes to its own bytes: no escape, no control character, valid
// UTF-8.
func (c *compact) plain() (span, bool) {
	data, start := c.data, c.pos
	if start == len(data) || data[start] != '"' {
		return span{}, false
	}
	ascii := true
	for i := start + 1; i < len(data); i++ {
		b := data[i]
		if b >= utf8.RuneSelf {
			ascii = false
			continue
		}
		if !stringStop[b] {
			continue
		}
		if b != '"' {
			return span{}, false
		}
		c.pos = i + 1
		return span{start, c.pos}, ascii || utf8.Valid(data[start+1:i])
	}
	return span{}, false
}

// null consumes the literal null.
func (c *compact) null() bool {
	if len(c.data)-c.pos >= 4 && string(c.data[c.pos:c.pos+4]) == "null" {
		c.pos += 4
		return true
	}
	return false
}

// strings reads an array of plain strings.
func (c *compact) strings() bool {
	if !c.next('[') {
		return false
	}
	if c.next(']') {
		return true
	}
	for {
		if _, ok := c.plain(); !ok {
			return false
		}
		if c.next(']') {
			return true
		}
		if !c.next(',') {
			return false
		}
	}
}

// payloadRef reads a payload_ref object: known, distinct members, plain strings and an integer.
func (c *compact) payloadRef() bool {
	if !c.next('{') {
		return false
	}
	if c.next('}') {
		return true
	}
	for {
		m, ok := c.member(refNames[:], c.refs[:])
		if !ok {
			return false
		}
		start := c.pos
		if m == refBytes {
			ok = c.integer()
		} else {
			_, ok = c.plain()
		}
		if !ok {
			return false
		}
		c.ref[m] = span{start, c.pos}
		if c.next('}') {
			return true
		}
		if !c.next(',') {
			return false
		}
	}
}

// integer reads a JSON number with no fraction and no exponent.
func (c *compact) integer() bool {
	c.next('-')
	start := c.pos
	for c.pos < len(c.data) && c.data[c.pos] >= '0' && c.data[c.pos] <= '9' {
		c.pos++
	}
	n := c.pos - start
	return n > 0 && (n == 1 || c.data[start] != '0') && !c.continuesNumber()
}

// continuesNumber reports whether a number goes on past c.pos (a fraction or an exponent).
func (c *compact) continuesNumber() bool {
	if c.pos == len(c.data) {
		return false
	}
	b := c.data[c.pos]
	return b == '.' || b == 'e' || b == 'E'
}

// envelope builds the Envelope from the spans document recorded; false when a value does not
// decode as json.Unmarshal would decode it here (a received_at that is not a time, a byte count
// out of range).
func (c *compact) envelope() (Envelope, bool) {
	var e Envelope
	m := &e.Metadata
	for i, dst := range [...]*string{&m.Provider, &m.ID, &m.DeliveryID, &m.Type, &m.ObjectID} {
		if c.seen[i] {
			*dst = c.str(c.spans[i])
		}
	}
	if c.seen[memberReceivedAt] {
		s := c.spans[memberReceivedAt]
		if m.ReceivedAt.UnmarshalJSON(c.data[s.start:s.end]) != nil {
			return Envelope{}, false
		}
	}
	if c.seen[memberSigned] {
		m.Signed = c.list(c.spans[memberSigned])
	}
	if c.seen[memberUnsigned] {
		m.Unsigned = c.list(c.spans[memberUnsigned])
	}
	if c.seen[memberPayload] {
		s := c.spans[memberPayload]
		e.Payload = json.RawMessage(c.data[s.start:s.end:s.end])
	}
	if c.seen[memberPayloadRef] && c.data[c.spans[memberPayloadRef].start] == '{' {
		ref, ok := c.payloadRefValue()
		if !ok {
			return Envelope{}, false
		}
		e.PayloadRef = ref
	}
	return e, true
}

// payloadRefValue builds the PayloadRef payloadRef read.
func (c *compact) payloadRefValue() (*PayloadRef, bool) {
	ref := &PayloadRef{}
	for i, dst := range [...]*string{refBucket: &ref.Bucket, refKey: &ref.Key, refSHA256: &ref.SHA256} {
		if dst != nil && c.refs[i] {
			*dst = c.str(c.ref[i])
		}
	}
	if c.refs[refBytes] {
		s := c.ref[refBytes]
		n, err := strconv.ParseInt(string(c.data[s.start:s.end]), 10, 64)
		if err != nil {
			return nil, false
		}
		ref.Bytes = n
	}
	return ref, true
}

// list decodes an array of plain strings, or null, at s: a null is a nil slice, [] an empty one.
func (c *compact) list(s span) []string {
	if c.data[s.start] == 'n' {
		return nil
	}
	n := 0
	for i := s.start; i < s.end; i++ {
		if c.data[i] == '"' {
			n++
		}
	}
	l := make([]string, 0, n/2)
	for i := s.start + 1; i < s.end-1; {
		// i is at a string's opening quote (plain strings hold no quote).
		j := i + 1
		for c.data[j] != '"' {
			j++
		}
		l = append(l, c.str(span{i, j + 1}))
		i = j + 2 // past the closing quote and the comma
	}
	return l
}

// str returns the plain string at s (quotes included in s) without its quotes, as a substring
// of the one copy of the bytes on its side of the payload.
func (c *compact) str(s span) string {
	if s.end <= c.spans[memberPayload].start || !c.seen[memberPayload] {
		if !c.madeB {
			end := len(c.data)
			if c.seen[memberPayload] {
				end = c.spans[memberPayload].start
			}
			c.before, c.madeB = string(c.data[:end]), true
		}
		return c.before[s.start+1 : s.end-1]
	}
	from := c.spans[memberPayload].end
	if !c.madeA {
		c.after, c.madeA = string(c.data[from:]), true
	}
	return c.after[s.start+1-from : s.end-1-from]
}

// any reads one JSON value, white space allowed inside it but not around it.
func (c *compact) any(depth int) bool {
	if c.pos == len(c.data) || depth > maxCompactDepth {
		return false
	}
	switch b := c.data[c.pos]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		return c.jsonString()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.number()
	}
}

// literal consumes word.
func (c *compact) literal(word string) bool {
	if len(c.data)-c.pos >= len(word) && string(c.data[c.pos:c.pos+len(word)]) == word {
		c.pos += len(word)
		return true
	}
	return false
}

// space skips JSON's white space.
func (c *compact) space() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// object reads an object, c.pos at its '{'.
func (c *compact) object(depth int) bool {
	c.pos++
	c.space()
	if c.next('}') {
		return true
	}
	for {
		if !c.jsonString() {
			return false
		}
		c.space()
		if !c.next(':') {
			return false
		}
		c.space()
		if !c.any(depth) {
			return false
		}
		c.space()
		if c.next('}') {
			return true
		}
		if !c.next(',') {
			return false
		}
		c.space()
	}
}

// array reads an array, c.pos at its '['.
func (c *compact) array(depth int) bool {
	c.pos++
	c.space()
	if c.next(']') {
		return true
	}
	for {
		if !c.any(depth) {
			return false
		}
		c.space()
		if c.next(']') {
			return true
		}
		if !c.next(',') {
			return false
		}
		c.space()
	}
}

// jsonString reads any JSON string: escapes are checked, other bytes from 0x20 up are taken as
// they are (json.Unmarshal, too, accepts invalid UTF-8 in a document).
func (c *compact) jsonString() bool {
	data := c.data
	if c.pos == len(data) || data[c.pos] != '"' {
		return false
	}
	for i := c.pos + 1; i < len(data); i++ {
		b := data[i]
		if !stringStop[b] {
			continue
		}
		if b != '\\' {
			c.pos = i + 1
			return b == '"'
		}
		if c.pos = i + 1; !c.escape() {
			return false
		}
		i = c.pos - 1
	}
	return false
}

// stringStop marks the bytes a string's scan stops at: its end, an escape, a control character.
var stringStop = func() (t [256]bool) {
	for b := range 0x20 {
		t[b] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// escape reads what follows a backslash.
func (c *compact) escape() bool {
	if c.pos == len(c.data) {
		return false
	}
	b := c.data[c.pos]
	c.pos++
	switch b {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if len(c.data)-c.pos < 4 {
			return false
		}
		for _, h := range c.data[c.pos : c.pos+4] {
			if !isHex(h) {
				return false
			}
		}
		c.pos += 4
		return true
	}
	return false
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *compact) number() bool {
	c.next('-')
	switch {
	case c.next('0'):
	case c.digits() == 0:
		return false
	}
	if c.next('.') && c.digits() == 0 {
		return false
	}
	if c.next('e') || c.next('E') {
		if !c.next('+') {
			c.next('-')
		}
		if c.digits() == 0 {
			return false
		}
	}
	return true
}

// digits consumes a run of decimal digits and returns its length.
func (c *compact) digits() int {
	start := c.pos
	for c.pos < len(c.data) && c.data[c.pos] >= '0' && c.data[c.pos] <= '9' {
		c.pos++
	}
	return c.pos - start
}
