package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// errSchemeNoField means a JSON path names no member.
var errSchemeNoField = errors.New("no such field")

// maxPresetEventIDLen bounds an event id read from a body.
const maxPresetEventIDLen = 512

// schemeJSONPath returns the string or number at a dotted path of a JSON
// object, as text. A member that appears twice on the path, or a string that
// is not valid UTF-8 (a lone surrogate escape included), is ErrBadPayload:
// two readers of the body could otherwise disagree on which value is meant.
func schemeJSONPath(body []byte, path string) (string, error) {
	raw := json.RawMessage(body)
	for key := range strings.SplitSeq(path, ".") {
		member, err := schemeMember(raw, key)
		if err != nil {
			return "", err
		}
		raw = member
	}
	return schemeScalar(raw)
}

// schemeMember returns the value of member key of a JSON object.
func schemeMember(obj []byte, key string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: not a JSON object where %q is looked up", ErrBadPayload, key)
	}
	var found json.RawMessage
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
		k, _ := kt.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
		if k == key {
			if found != nil {
				return nil, fmt.Errorf("%w: member %q appears twice", ErrBadPayload, key)
			}
			found = val
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	if found == nil {
		return nil, fmt.Errorf("%w %q", errSchemeNoField, key)
	}
	return found, nil
}

// schemeScalar returns a JSON string's value or a number's digits.
func schemeScalar(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", errSchemeNoField
	}
	switch {
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
		if !utf8.Valid(raw) || strings.ContainsRune(s, utf8.RuneError) {
			return "", fmt.Errorf("%w: string is not valid UTF-8", ErrBadPayload)
		}
		if s == "" {
			return "", fmt.Errorf("%w: empty string", errSchemeNoField)
		}
		return s, nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("%w: %v", ErrBadPayload, err)
		}
		return n.String(), nil
	}
	return "", fmt.Errorf("%w: not a string or a number", ErrBadPayload)
}

// schemeFields reads a Source.Field: one path, or several comma-separated
// paths joined with "|".
func schemeFields(body []byte, fields string) (string, error) {
	var parts []string
	for path := range strings.SplitSeq(fields, ",") {
		s, err := schemeJSONPath(body, strings.TrimSpace(path))
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "|"), nil
}

// Event extracts the deduplication key, the type and the object of a
// delivery that Verify accepted, or the handshake answer for an
// endpoint-validation request. Errors wrap ErrBadPayload (the body is not
// what the sender sends, or is ambiguous: a member named twice on the id's
// path, an id that is not valid UTF-8), ErrNoEventID, or ErrNoPublicURL.
func (v *Verifier) Event(r Request) (Delivery, error) {
	p := v.preset
	if hs, ok, err := v.handshake(r); err != nil || ok {
		return Delivery{Handshake: hs}, err
	}
	var d Delivery
	switch {
	case p.EventID.Field != "":
		id, err := schemeFields(r.Body, p.EventID.Field)
		if err != nil {
			if errors.Is(err, ErrBadPayload) {
				return Delivery{}, err
			}
			return Delivery{}, fmt.Errorf("%w: %w", ErrNoEventID, err)
		}
		d.ID = id
	case p.EventID.Header != "":
		d.ID = header(r.Headers, p.EventID.Header)
		if d.ID == "" {
			return Delivery{}, fmt.Errorf("%w: no %s header", ErrNoEventID, p.EventID.Header)
		}
	default:
		id, err := v.digestID(r)
		if err != nil {
			return Delivery{}, err
		}
		d.ID = id
	}
	if len(d.ID) > maxPresetEventIDLen {
		return Delivery{}, fmt.Errorf("%w: event id longer than %d bytes", ErrBadPayload, maxPresetEventIDLen)
	}
	if !utf8.ValidString(d.ID) {
		// Distinct ids must not collapse into one key when decoded.
		return Delivery{}, fmt.Errorf("%w: event id is not valid UTF-8", ErrBadPayload)
	}
	switch {
	case p.EventType.Field != "":
		t, err := schemeFields(r.Body, p.EventType.Field)
		if errors.Is(err, ErrBadPayload) {
			return Delivery{}, err
		}
		d.Type = t
	case p.EventType.Header != "":
		d.Type = strings.ToValidUTF8(header(r.Headers, p.EventType.Header), "\uFFFD")
		if !v.headerSigned(p.EventType.Header) && d.Type != "" {
			d.Unsigned = append(d.Unsigned, "type")
		}
	}
	if p.ObjectField != "" {
		obj, err := schemeFields(r.Body, p.ObjectField)
		if errors.Is(err, ErrBadPayload) {
			return Delivery{}, err
		}
		d.ObjectID = obj
	}
	if p.Family == FamilyToken || p.Family == FamilyBodySignature {
		// A token binds nothing; Mailgun signs its token, not the event.
		if d.Type != "" && !slices.Contains(d.Unsigned, "type") {
			d.Unsigned = append(d.Unsigned, "type")
		}
		if d.ObjectID != "" {
			d.Unsigned = append(d.Unsigned, "object_id")
		}
	}
	return d, nil
}

// headerSigned reports whether the signature covers header name.
func (v *Verifier) headerSigned(name string) bool {
	p := v.preset
	return (name == p.IDHeader && schemeLayoutUses(v.layout, "id")) ||
		(name == p.TimestampHeader && schemeLayoutUses(v.layout, "timestamp"))
}

// digestID is "sha256:" and the hex SHA-256 of the signed content rendered
// without its timestamp, the URL without a port: the same for every retry of
// one delivery (a retry re-signs with a new timestamp) and for every spelling
// of it that verifies (a reordered form body, another port).
func (v *Verifier) digestID(r Request) (string, error) {
	body := r.Body
	if len(v.preset.DigestOmits) > 0 {
		var err error
		if body, err = schemeOmit(r.Body, v.preset.DigestOmits); err != nil {
			return "", err
		}
	}
	var content []byte
	switch v.preset.Family {
	case FamilyToken, FamilyBodySignature, FamilyPublicKey:
		content = body
	default:
		vals, err := v.signedValues(r, "")
		if err != nil {
			return "", err
		}
		if schemeLayoutUses(v.layout, "url") {
			u := schemeURLWithoutPort(r.URL)
			if v.preset.URLDecodeReserved {
				u = DecodeReservedURL(u)
			}
			vals.url = []byte(u)
		}
		vals.body = body
		content = renderLayout(v.layout, vals)
	}
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// schemeOmit re-encodes a JSON body without the named members, at any
// depth.
func schemeOmit(body []byte, names []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	var strip func(any) any
	strip = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for _, n := range names {
				delete(t, n)
			}
			for k, e := range t {
				t[k] = strip(e)
			}
		case []any:
			for i, e := range t {
				t[i] = strip(e)
			}
		}
		return x
	}
	out, err := json.Marshal(strip(v))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	return out, nil
}
