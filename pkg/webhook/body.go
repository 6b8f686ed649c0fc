package webhook

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/idemlambda/idem/internal/preset"
)

// The body of a delivery is read in one pass: scanJSON validates the whole
// document, and on the way records the values at the paths the sender's
// preset reads (its event id, type, object, signed timestamp, signature
// fields, handshake fields), the top-level members, and when asked a
// compact copy. Everything a delivery needs from its body comes from that
// pass.

// maxJSONDepth bounds the nesting of a body, as encoding/json bounds it: a
// sink encoding the payload refuses deeper documents.
const maxJSONDepth = 10000

// errNoField means a JSON path names no member.
var errNoField = errors.New("no such field")

// errNotScalar means a JSON path names a member that is neither a string nor
// a number, or goes through one that is not an object (it always comes
// wrapped in ErrBadPayload).
var errNotScalar = errors.New("not a string or a number")

// pathNode is a node of the tree of member paths a preset reads.
type pathNode struct {
	// children are the members read below the node: a preset reads a few,
	// so a member's name is looked up among them in a loop.
	children []*pathNode
	name     string // the member's name
	path     string // the dotted path of the node, as document.values keys it
}

// child returns the child called name, or nil.
func (n *pathNode) child(name []byte) *pathNode {
	for _, c := range n.children {
		if c.name == string(name) {
			return c
		}
	}
	return nil
}

// bodyPlan is what a preset reads from a JSON body, fixed at construction.
type bodyPlan struct {
	paths *pathNode // nil: no member is read
	// compact asks for a compact copy of the document (a fingerprint over
	// selected members, a payload without the signature object).
	compact bool
}

// planBody collects the member paths p reads.
func planBody(p preset.Preset) bodyPlan {
	var paths []string
	for _, f := range []string{p.EventID.Field, p.EventType.Field, p.ObjectField, p.TimestampField, p.SignatureField, p.TokenField} {
		paths = append(paths, splitPaths(f)...)
	}
	switch p.Handshake {
	case preset.HandshakeDiscordPing:
		paths = append(paths, "type")
	case preset.HandshakeZoomURLValidation:
		paths = append(paths, "event", "payload.plainToken")
	case preset.HandshakeTwitchChallenge:
		paths = append(paths, "challenge")
	case preset.HandshakeSlackURLVerification:
		paths = append(paths, "type", "challenge")
	case preset.HandshakeIntercomPing:
		paths = append(paths, "topic")
	}
	plan := bodyPlan{compact: len(p.FingerprintFields) > 0 || p.SignatureField != ""}
	for _, path := range paths {
		if plan.paths == nil {
			plan.paths = &pathNode{}
		}
		n := plan.paths
		for key := range strings.SplitSeq(path, ".") {
			next := n.child([]byte(key))
			if next == nil {
				next = &pathNode{name: key, path: key}
				if n.path != "" {
					next.path = n.path + "." + key
				}
				n.children = append(n.children, next)
			}
			n = next
		}
	}
	return plan
}

// splitPaths splits a Source.Field-like list ("a|b", "a,b", "a+b") into its
// dotted paths.
func splitPaths(fields string) []string {
	return strings.FieldsFunc(fields, func(r rune) bool { return r == ',' || r == '|' || r == '+' || r == ' ' })
}

// member is a member of the document's top-level object.
type member struct {
	// name is the member's name as written between its quotes, or decoded
	// when it holds escapes; it aliases the body, so keeping it costs no
	// allocation.
	name []byte
	// start and end delimit the member (name to value) in document.compact
	// when it is kept, else in document.raw; value starts the value.
	start, value, end int
}

// found is the value of a read path, or why there is none.
type found struct {
	raw       []byte
	ambiguous bool // the member is named twice
}

// document is what one pass over a JSON body yields.
type document struct {
	raw     []byte
	compact []byte // raw without insignificant white space, when planned
	object  bool   // the document is an object
	top     []member
	// values holds the value of every read path present, and of its
	// prefixes, by dotted path.
	values map[string]found
	// duplicate is set when the top-level object names a member twice.
	duplicate bool
	err       error // the body is not one JSON document (ErrBadPayload)
}

// lookup returns the raw value at a dotted path.
func (d *document) lookup(path string) ([]byte, error) {
	if d.err != nil {
		return nil, d.err
	}
	if !d.object {
		return nil, fmt.Errorf("%w: %w: the body is not a JSON object", ErrBadPayload, errNotScalar)
	}
	for i := 0; ; {
		j := strings.IndexByte(path[i:], '.')
		prefix := path
		if j >= 0 {
			prefix = path[:i+j]
		}
		f, ok := d.values[prefix]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w %q", errNoField, prefix[i:])
		case f.ambiguous:
			return nil, fmt.Errorf("%w: member %q appears twice", ErrBadPayload, prefix[i:])
		case j < 0:
			return f.raw, nil
		case len(f.raw) == 0 || f.raw[0] != '{':
			return nil, fmt.Errorf("%w: %w: not a JSON object where %q is looked up", ErrBadPayload, errNotScalar, path[i+j+1:])
		}
		i += j + 1
	}
}

// scalar returns the string or number at a dotted path, as text; textOnly
// refuses a number.
func (d *document) scalar(path string, textOnly bool) (string, error) {
	raw, err := d.lookup(path)
	if err != nil {
		return "", err
	}
	if textOnly && len(raw) > 0 && raw[0] != '"' {
		return "", fmt.Errorf("%w: %w", ErrBadPayload, errNotScalar)
	}
	return jsonScalar(raw)
}

// member returns the top-level member called name.
func (d *document) member(name string) (member, bool) {
	i := slices.IndexFunc(d.top, func(m member) bool { return string(m.name) == name })
	if i < 0 {
		return member{}, false
	}
	return d.top[i], true
}

// memberAfter returns the top-level member called name, looking from top
// index *next on, then from the start, and sets *next past the member
// found: members read in the order the body gives them (a sender that
// sorts its members, read by sorted name) are found at the first look.
// In a document that names a member twice it is member: the first one.
func (d *document) memberAfter(name string, next *int) (member, bool) {
	if d.duplicate {
		return d.member(name)
	}
	n := len(d.top)
	for k := range n {
		i := (*next + k) % n
		if string(d.top[i].name) == name {
			*next = i + 1
			return d.top[i], true
		}
	}
	return member{}, false
}

// documents are the documents of deliveries verified, for the next ones:
// their members and values are kept for a delivery's verification only.
var documents = sync.Pool{New: func() any { return &document{top: make([]member, 0, 16)} }}

// maxPooledCompact bounds the compact copy a pooled document keeps for the
// next delivery: a larger one is left to the collector.
const maxPooledCompact = 64 << 10

// releaseDocument returns doc (which may be nil) to documents once nothing
// reads it any more. A large one is left to the collector. Its compact copy
// is kept for the next document's: nothing a delivery holds aliases it
// (Verifier.payload copies what it keeps of it).
func releaseDocument(doc *document) {
	if doc == nil || cap(doc.top) > 256 || len(doc.values) > 64 {
		return
	}
	clear(doc.top)
	clear(doc.values)
	compact := doc.compact[:0]
	if cap(compact) > maxPooledCompact {
		compact = nil
	}
	*doc = document{top: doc.top[:0], values: doc.values, compact: compact}
	documents.Put(doc)
}

// scanJSON reads body in one pass as plan says.
func scanJSON(body []byte, plan bodyPlan) *document {
	doc := documents.Get().(*document)
	doc.raw = body
	s := scanner{in: body, doc: doc, compact: plan.compact}
	if plan.compact {
		// The compact copy is at most the body: the pooled document's
		// buffer when it is large enough.
		if s.out = doc.compact[:0]; cap(s.out) < len(body) {
			s.out = make([]byte, 0, len(body))
		}
	}
	doc.compact = nil
	s.space()
	s.doc.object = s.pos < len(body) && body[s.pos] == '{'
	err := s.value(0, plan.paths, true)
	if err == nil {
		s.space()
		if s.pos != len(body) {
			err = s.fail("data after the JSON document")
		}
	}
	if err != nil {
		s.doc.err = fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	if plan.compact {
		s.doc.compact = append(s.out, body[s.mark:s.pos]...)
	}
	return s.doc
}

// scanner is the state of one pass of scanJSON.
type scanner struct {
	in  []byte
	pos int
	// out is the compact copy, when compact: in up to mark without its
	// insignificant white space.
	out     []byte
	mark    int
	compact bool
	doc     *document
}

func (s *scanner) fail(what string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", s.pos, what)
}

// offset is the current position in the coordinates members are kept in:
// the compact copy's when one is made (what it holds, and what is still to
// be copied from mark), else the body's.
func (s *scanner) offset() int {
	if s.compact {
		return len(s.out) + s.pos - s.mark
	}
	return s.pos
}

// space skips insignificant white space. The compact copy is made here: what
// lies between the last white space and this one is copied in one piece.
func (s *scanner) space() {
	i := s.pos
	for i < len(s.in) && (s.in[i] == ' ' || s.in[i] == '\n' || s.in[i] == '\r' || s.in[i] == '\t') {
		i++
	}
	if i == s.pos {
		return
	}
	if s.compact {
		s.out = append(s.out, s.in[s.mark:s.pos]...)
		s.mark = i
	}
	s.pos = i
}

// value scans one value; node is the path tree below it (nil: nothing read
// inside), top whether it is the document.
func (s *scanner) value(depth int, node *pathNode, top bool) error {
	if depth > maxJSONDepth {
		return s.fail("nested too deeply")
	}
	if s.pos >= len(s.in) {
		return s.fail("unexpected end")
	}
	switch c := s.in[s.pos]; {
	case c == '{':
		return s.object(depth, node, top)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.literal()
	}
}

// object scans an object, recording the members node reads.
func (s *scanner) object(depth int, node *pathNode, top bool) error {
	s.pos++
	s.space()
	if s.pos < len(s.in) && s.in[s.pos] == '}' {
		s.pos++
		return nil
	}
	for {
		if err := s.member(depth, node, top); err != nil {
			return err
		}
		s.space()
		if s.pos >= len(s.in) {
			return s.fail("unexpected end in an object")
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
			s.space()
		case '}':
			s.pos++
			return nil
		default:
			return s.fail("want ',' or '}' in an object")
		}
	}
}

// member scans one member of an object: its name, the colon and its value.
func (s *scanner) member(depth int, node *pathNode, top bool) error {
	start := s.offset()
	raw, decoded, err := s.key()
	if err != nil {
		return err
	}
	s.space()
	if s.pos >= len(s.in) || s.in[s.pos] != ':' {
		return s.fail("want ':' after a member name")
	}
	s.pos++
	s.space()
	valueAt, from := s.offset(), s.pos
	var child *pathNode
	switch {
	case node == nil:
	case decoded == nil:
		child = node.child(raw)
	default:
		child = node.child([]byte(*decoded))
	}
	if err := s.value(depth+1, child, false); err != nil {
		return err
	}
	if child != nil {
		s.record(child.path, s.in[from:s.pos])
	}
	if top {
		name := raw
		if decoded != nil {
			name = []byte(*decoded)
		}
		s.topMember(member{name: name, start: start, value: valueAt, end: s.offset()})
	}
	return nil
}

// record keeps the value of a read path; a second one makes it ambiguous.
func (s *scanner) record(path string, raw []byte) {
	if s.doc.values == nil {
		s.doc.values = make(map[string]found, 8)
	}
	if _, seen := s.doc.values[path]; seen {
		s.doc.values[path] = found{ambiguous: true}
		return
	}
	s.doc.values[path] = found{raw: raw}
}

// topMember keeps a top-level member, noting a name given twice.
func (s *scanner) topMember(m member) {
	if !s.doc.duplicate && slices.ContainsFunc(s.doc.top, func(o member) bool { return bytes.Equal(o.name, m.name) }) {
		s.doc.duplicate = true
	}
	s.doc.top = append(s.doc.top, m)
}

// key scans a member name: its bytes between the quotes and, when it holds
// escapes, its decoded text ("id" and "\u0069d" name one member).
func (s *scanner) key() ([]byte, *string, error) {
	if s.pos >= len(s.in) || s.in[s.pos] != '"' {
		return nil, nil, s.fail("want a member name")
	}
	from := s.pos
	escaped, err := s.str()
	if err != nil {
		return nil, nil, err
	}
	if !escaped {
		return s.in[from+1 : s.pos-1], nil, nil
	}
	var name string
	if err := json.Unmarshal(s.in[from:s.pos], &name); err != nil {
		return nil, nil, s.fail("member name")
	}
	return nil, &name, nil
}

// str scans a string and reports whether it holds escapes.
func (s *scanner) str() (bool, error) {
	in, i := s.in, s.pos+1
	escaped := false
	for i < len(in) {
		// Eight plain bytes at a time, then one at a time up to the next
		// byte that is not plain.
		for ; i+8 <= len(in); i += 8 {
			if !plainWord(binary.LittleEndian.Uint64(in[i : i+8])) {
				break
			}
		}
		for i < len(in) && plainStringByte[in[i]] {
			i++
		}
		if i == len(in) {
			break
		}
		c := in[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return escaped, nil
		case c == '\\':
			escaped = true
			s.pos = i
			if err := s.escape(); err != nil {
				return false, err
			}
			i = s.pos
		default: // below 0x20
			s.pos = i
			return false, s.fail("control character in a string")
		}
	}
	s.pos = i
	return false, s.fail("unterminated string")
}

// plainStringByte marks the bytes a string holds as they are: all but the
// quote, the backslash and the control characters. A byte from 0x80 is
// plain: no byte of a multi-byte UTF-8 sequence is a quote, a backslash or
// a control character, and invalid UTF-8 is kept (encoding/json accepts it
// too, and reading a member, jsonScalar, refuses it).
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 0x100; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainWord reports whether the eight bytes packed in x are all plain
// (plainStringByte). It may report false for plain bytes following one that
// is not (a borrow of the subtraction), never true for a byte that is not:
// the lowest such byte always sets its high bit in one of the terms, and a
// byte from 0x80 has its own high bit cleared by the mask.
func plainWord(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	control := x - 0x20*ones            // a byte below 0x20 borrows
	quote := (x ^ '"'*ones) - ones      // a quote becomes zero, then borrows
	backslash := (x ^ '\\'*ones) - ones // likewise a backslash
	return (control|quote|backslash)&^x&highs == 0
}

// escape scans one escape sequence of a string.
func (s *scanner) escape() error {
	if s.pos+1 >= len(s.in) {
		return s.fail("unterminated escape")
	}
	switch s.in[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
	case 'u':
		if s.pos+6 > len(s.in) {
			return s.fail("short \\u escape")
		}
		for _, h := range s.in[s.pos+2 : s.pos+6] {
			if !isHex(h) {
				return s.fail("bad \\u escape")
			}
		}
		s.pos += 6
	default:
		return s.fail("bad escape")
	}
	return nil
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *scanner) digits() int {
	n := 0
	for s.pos < len(s.in) && s.in[s.pos] >= '0' && s.in[s.pos] <= '9' {
		s.pos++
		n++
	}
	return n
}

// number scans a number as JSON writes them.
func (s *scanner) number() error {
	if s.in[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.in) && s.in[s.pos] == '0':
		s.pos++
	case s.digits() == 0:
		return s.fail("bad number")
	}
	if s.pos < len(s.in) && s.in[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.fail("bad fraction")
		}
	}
	if s.pos < len(s.in) && (s.in[s.pos] == 'e' || s.in[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.in) && (s.in[s.pos] == '+' || s.in[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.fail("bad exponent")
		}
	}
	return nil
}

// literal scans true, false or null.
func (s *scanner) literal() error {
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(s.in[s.pos:], []byte(lit)) {
			s.pos += len(lit)
			return nil
		}
	}
	return s.fail("unexpected character")
}

// array scans an array.
func (s *scanner) array(depth int) error {
	s.pos++
	s.space()
	if s.pos < len(s.in) && s.in[s.pos] == ']' {
		s.pos++
		return nil
	}
	for {
		if err := s.value(depth+1, nil, false); err != nil {
			return err
		}
		s.space()
		if s.pos >= len(s.in) {
			return s.fail("unexpected end in an array")
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
			s.space()
		case ']':
			s.pos++
			return nil
		default:
			return s.fail("want ',' or ']' in an array")
		}
	}
}
