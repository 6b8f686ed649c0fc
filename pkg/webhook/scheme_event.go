package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// errSchemeNoField means a JSON path names no member.
var errSchemeNoField = errors.New("no such field")

// errSchemeNotScalar means a JSON path names a member that is neither a
// string nor a number (it always comes wrapped in ErrBadPayload).
var errSchemeNotScalar = errors.New("not a string or a number")

// schemeJSONPath returns the string or number at a dotted path of a JSON
// object, as text. A member that appears twice on the path, or a string that
// is not valid UTF-8 (a lone surrogate escape included), is ErrBadPayload:
// two readers of the body could otherwise disagree on which value is meant.
func schemeJSONPath(body []byte, path string) (string, error) {
	return schemeJSONValue(body, path, false)
}

// schemeJSONText is schemeJSONPath for a member that must be a JSON string:
// a number is errSchemeNotScalar, as the senders' ids and challenges are
// always strings.
func schemeJSONText(body []byte, path string) (string, error) {
	return schemeJSONValue(body, path, true)
}

func schemeJSONValue(body []byte, path string, textOnly bool) (string, error) {
	raw := json.RawMessage(body)
	for key := range strings.SplitSeq(path, ".") {
		member, err := schemeMember(raw, key)
		if err != nil {
			return "", err
		}
		raw = member
	}
	if textOnly && len(raw) > 0 && raw[0] != '"' {
		return "", fmt.Errorf("%w: %w", ErrBadPayload, errSchemeNotScalar)
	}
	return schemeScalar(raw)
}

// schemeMember returns the value of member key of a JSON object.
func schemeMember(obj []byte, key string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: %w: not a JSON object where %q is looked up", ErrBadPayload, errSchemeNotScalar, key)
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
	return "", fmt.Errorf("%w: %w", ErrBadPayload, errSchemeNotScalar)
}

// schemeIDFields reads an event id's Source.Field: one path, or several
// comma-separated paths joined with "|"; a path may list alternatives
// separated by "|", the first present one read. Each member must be a JSON
// string, so that 7 and "7" cannot be two spellings of one key.
func schemeIDFields(body []byte, fields string) (string, error) {
	var parts []string
	for path := range strings.SplitSeq(fields, ",") {
		s, err := schemeAlternatives(body, strings.TrimSpace(path), true)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "|"), nil
}

// schemeAlternatives reads the first present of "|"-separated paths.
func schemeAlternatives(body []byte, paths string, textOnly bool) (string, error) {
	var err error
	for path := range strings.SplitSeq(paths, "|") {
		var s string
		if s, err = schemeJSONValue(body, path, textOnly); err == nil || errors.Is(err, ErrBadPayload) {
			return s, err
		}
	}
	return "", err
}

// schemeDescriptive reads a descriptive field (Preset.EventType.Field,
// Preset.ObjectField): paths separated by "|" are alternatives, paths
// separated by "+" are joined with "/", absent ones skipped. A member that
// is not a string or a number counts as absent; an ambiguous body (a member
// named twice on the path) is ErrBadPayload.
func schemeDescriptive(body []byte, fields string, textOnly bool) (string, error) {
	var parts []string
	for alternatives := range strings.SplitSeq(fields, "+") {
		for path := range strings.SplitSeq(alternatives, "|") {
			s, err := schemeJSONValue(body, path, textOnly)
			if err == nil {
				parts = append(parts, s)
				break
			}
			if errors.Is(err, ErrBadPayload) && !errors.Is(err, errSchemeNotScalar) {
				return "", err
			}
		}
	}
	return strings.Join(parts, "/"), nil
}

// Event extracts the deduplication key, the type and the object of a
// delivery that Verify accepted, the payload for the sink and what its
// fingerprint covers, or the handshake answer for an endpoint-validation
// request. Errors wrap ErrBadPayload (the body is not what the sender sends,
// or is ambiguous: a member named twice on the id's path, an id that is not
// valid UTF-8), ErrNoEventID, or ErrNoPublicURL.
func (v *Verifier) Event(r Request) (Delivery, error) {
	p := v.preset
	r = v.withAliases(r)
	if p.Family == FamilyItemHMAC {
		return v.itemsEvent(r)
	}
	if hs, ok, err := v.handshake(r); err != nil || ok {
		if hs != nil && hs.Kind == "" {
			hs.Kind = p.Handshake
		}
		return Delivery{Handshake: hs}, err
	}
	doc, err := v.document(r)
	if err != nil {
		return Delivery{}, err
	}
	d := Delivery{Payload: doc, Fingerprint: Fingerprint{Content: r.Body, Fields: p.FingerprintFields}}
	switch {
	case p.EventID.Field != "":
		id, err := schemeIDFields(doc, p.EventID.Field)
		if err != nil {
			if errors.Is(err, ErrBadPayload) && !errors.Is(err, errSchemeNotScalar) {
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
	if !utf8.ValidString(d.ID) {
		// Distinct ids must not collapse into one key when decoded.
		return Delivery{}, fmt.Errorf("%w: event id is not valid UTF-8", ErrBadPayload)
	}
	if len(p.DeliveryIDHeaders) > 0 {
		for _, name := range p.DeliveryIDHeaders {
			if d.DeliveryID = header(r.Headers, name); d.DeliveryID != "" {
				break
			}
		}
		if d.DeliveryID == "" {
			return Delivery{}, fmt.Errorf("%w: none of %s is set", ErrNoEventID, strings.Join(p.DeliveryIDHeaders, ", "))
		}
		d.Unsigned = append(d.Unsigned, "delivery_id")
	}
	switch {
	case p.EventType.Field != "":
		t, err := schemeDescriptive(doc, p.EventType.Field, p.EventType.Text)
		if err != nil {
			return Delivery{}, err
		}
		d.Type = t
	case p.EventType.Header != "":
		d.Type = strings.ToValidUTF8(header(r.Headers, p.EventType.Header), "\uFFFD")
		if !v.headerSigned(p.EventType.Header) && (d.Type != "" || len(p.DeliveryIDHeaders) > 0) {
			d.Unsigned = append(d.Unsigned, "type")
		}
	}
	if p.ObjectField != "" {
		obj, err := schemeDescriptive(doc, p.ObjectField, false)
		if err != nil {
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
	if len(p.DigestOmits) > 0 {
		// The sender re-stamps these members on each attempt: the
		// fingerprint, like the key, leaves them out.
		if d.Fingerprint.Content, err = schemeOmit(r.Body, p.DigestOmits); err != nil {
			return Delivery{}, err
		}
	}
	return d, nil
}

// readsBody reports whether the preset reads anything from the JSON body.
func (p Preset) readsBody() bool {
	return p.EventID.Field != "" || p.EventType.Field != "" || p.ObjectField != "" || p.FormPayloadField != ""
}

// document returns the JSON document a verified delivery carries: the body;
// the JSON of the form field Preset.FormPayloadField for a form-encoded
// delivery; for another form body, a JSON object of its parameters (a
// repeated name's values as an array). A preset that reads body fields needs
// a JSON object with no member named twice, or gets ErrBadPayload.
func (v *Verifier) document(r Request) ([]byte, error) {
	p := v.preset
	doc := r.Body
	form := schemeFormBody(r.Headers)
	switch {
	case form && p.FormPayloadField != "":
		values, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return nil, fmt.Errorf("%w: form body: %s", ErrBadPayload, quote(err.Error()))
		}
		doc = []byte(values.Get(p.FormPayloadField))
	case form && schemeLayoutUses(v.layout, phForm) && !json.Valid(r.Body):
		values, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return nil, fmt.Errorf("%w: form body: %s", ErrBadPayload, quote(err.Error()))
		}
		obj := make(map[string]any, len(values))
		for k, vs := range values {
			if len(vs) == 1 {
				obj[k] = strings.ToValidUTF8(vs[0], "\uFFFD")
				continue
			}
			for i := range vs {
				vs[i] = strings.ToValidUTF8(vs[i], "\uFFFD")
			}
			obj[strings.ToValidUTF8(k, "\uFFFD")] = vs
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("%w: form body: %v", ErrBadPayload, err)
		}
		return b, nil
	}
	if p.readsBody() || p.Handshake == HandshakeSlackURLVerification {
		if err := checkObject(doc); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// headerSigned reports whether the signature covers header name.
func (v *Verifier) headerSigned(name string) bool {
	p := v.preset
	return (name == p.IDHeader && schemeLayoutUses(v.layout, phID)) ||
		(name == p.TimestampHeader && schemeLayoutUses(v.layout, phTimestamp))
}

// digestID is "sha256:" and the hex SHA-256 of the signed content rendered
// without its timestamp, the URL without a port: the same for every retry of
// one delivery (a retry re-signs with a new timestamp) and for every spelling
// of it that verifies (a reordered form body, another port).
func (v *Verifier) digestID(r Request) (string, error) {
	if v.usesLegacySignature(r) {
		return v.legacyDigestID(r)
	}
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
		if schemeLayoutUses(v.layout, phURL) {
			vals[phURL] = v.signedURL(schemeURLWithoutPort(r.URL))
		}
		vals[phBody] = body
		content = renderLayout(v.layout, vals)
	}
	return BodyDigestID(content), nil
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
