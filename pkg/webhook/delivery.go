package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/idemlambda/idem/internal/preset"
)

// bodyDigestPrefix starts the Delivery.ID of a sender whose own id is
// unsigned: "sha256:" and the hex SHA-256 of the signed content follow.
const bodyDigestPrefix = "sha256:"

// digestKey is bodyDigestPrefix and the hex SHA-256 of content.
func digestKey(content []byte) string {
	sum := sha256.Sum256(content)
	return bodyDigestPrefix + hex.EncodeToString(sum[:])
}

// jsonScalar returns a JSON string's value or a number's digits. A string
// that is not valid UTF-8 (a lone surrogate escape included) is
// ErrBadPayload: two readers of the body could otherwise disagree on it.
func jsonScalar(raw []byte) (string, error) {
	if len(raw) == 0 {
		return "", errNoField
	}
	switch {
	case raw[0] == '"':
		s, err := jsonString(raw)
		if err != nil {
			return "", err
		}
		if s == "" {
			return "", fmt.Errorf("%w: empty string", errNoField)
		}
		return s, nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		return string(raw), nil // scanJSON checked the number's syntax
	}
	return "", fmt.Errorf("%w: %w", ErrBadPayload, errNotScalar)
}

// jsonString decodes a JSON string scanJSON accepted.
func jsonString(raw []byte) (string, error) {
	inner := raw[1 : len(raw)-1]
	if !utf8.Valid(inner) {
		return "", fmt.Errorf("%w: string is not valid UTF-8", ErrBadPayload)
	}
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadPayload, err)
	}
	if strings.ContainsRune(s, utf8.RuneError) {
		return "", fmt.Errorf("%w: string is not valid UTF-8", ErrBadPayload)
	}
	return s, nil
}

// idFields reads an event id's Source.Field: one path, or several
// comma-separated paths joined with "|"; a path may list alternatives
// separated by "|", the first present one read. Each member must be a JSON
// string, so that 7 and "7" cannot be two spellings of one key.
func idFields(doc *document, fields string) (string, error) {
	if !strings.Contains(fields, ",") {
		return firstPresent(doc, fields, true)
	}
	var parts []string
	for path := range strings.SplitSeq(fields, ",") {
		s, err := firstPresent(doc, strings.TrimSpace(path), true)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "|"), nil
}

// firstPresent reads the first present of "|"-separated paths.
func firstPresent(doc *document, paths string, textOnly bool) (string, error) {
	var err error
	for path := range strings.SplitSeq(paths, "|") {
		var s string
		if s, err = doc.scalar(path, textOnly); err == nil || errors.Is(err, ErrBadPayload) {
			return s, err
		}
	}
	return "", err
}

// descriptive reads a descriptive field (Source.Field of an event type, an
// object field): paths separated by "|" are alternatives, paths separated by
// "+" are joined with "/", absent ones skipped. A member that is not a
// string or a number counts as absent; an ambiguous body (a member named
// twice on the path) is ErrBadPayload.
func descriptive(doc *document, fields string, textOnly bool) (string, error) {
	var first string // the only part, most often: no slice for it
	var parts []string
	for alternatives := range strings.SplitSeq(fields, "+") {
		for path := range strings.SplitSeq(alternatives, "|") {
			s, err := doc.scalar(path, textOnly)
			if err == nil {
				switch {
				case first == "" && parts == nil:
					first = s
				case parts == nil:
					parts = []string{first, s}
				default:
					parts = append(parts, s)
				}
				break
			}
			if errors.Is(err, ErrBadPayload) && !errors.Is(err, errNotScalar) {
				return "", err
			}
		}
	}
	if parts == nil {
		return first, nil
	}
	return strings.Join(parts, "/"), nil
}

// delivery reads a verified delivery from its headers and its parsed body;
// secret is the index of the secret that verified it.
func (v *Verifier) delivery(r Request, doc *document, secret int) (Delivery, error) {
	p := v.preset
	if hs, ok, err := v.handshake(r, doc, secret); err != nil || ok {
		if hs != nil && hs.Kind == "" {
			hs.Kind = string(p.Handshake)
		}
		return Delivery{Handshake: hs}, err
	}
	if err := v.checkDocument(doc); err != nil {
		return Delivery{}, err
	}
	d := Delivery{Payload: doc.raw}
	var err error
	if d.ID, err = v.eventID(r, doc); err != nil {
		return Delivery{}, err
	}
	if d.DeliveryID, err = v.deliveryID(r); err != nil {
		return Delivery{}, err
	}
	if err := v.describe(r, doc, &d); err != nil {
		return Delivery{}, err
	}
	d.Unsigned = v.unsigned(d)
	if d.Payload, err = v.payload(doc); err != nil {
		return Delivery{}, err
	}
	if d.Fingerprint, err = v.fingerprint(r, doc); err != nil {
		return Delivery{}, err
	}
	return d, nil
}

// deliveryID is the sender's own delivery id, when its signature does not
// cover it: the first of Preset.DeliveryIDHeaders present.
func (v *Verifier) deliveryID(r Request) (string, error) {
	names := v.preset.DeliveryIDHeaders
	for _, name := range names {
		if id := v.header(r.Header, name); id != "" {
			return id, nil
		}
	}
	if len(names) > 0 {
		return "", fmt.Errorf("%w: none of %s is set", ErrNoEventID, strings.Join(names, ", "))
	}
	return "", nil
}

// describe reads the event type and the object of d.
func (v *Verifier) describe(r Request, doc *document, d *Delivery) error {
	p := v.preset
	var err error
	switch {
	case p.EventType.Field != "":
		if d.Type, err = descriptive(doc, p.EventType.Field, p.EventType.Text); err != nil {
			return err
		}
	case p.EventType.Header != "":
		d.Type = strings.ToValidUTF8(v.header(r.Header, p.EventType.Header), "\uFFFD")
	}
	if p.ObjectField != "" {
		d.ObjectID, err = descriptive(doc, p.ObjectField, false)
	}
	return err
}

// checkDocument refuses a body the sink could not carry (not one JSON
// document, or nested too deeply), and for a preset that reads members, one
// that is not an object or names a member twice: JSON parsers disagree on
// which one counts (encoding/json keeps the last, others the first), so the
// key and what a consumer reads could differ.
func (v *Verifier) checkDocument(doc *document) error {
	if doc.err != nil {
		return doc.err
	}
	if !readsBody(v.preset) && v.preset.Handshake != preset.HandshakeSlackURLVerification {
		return nil
	}
	if !doc.object {
		return fmt.Errorf("%w: body is not a JSON object", ErrBadPayload)
	}
	if doc.duplicate {
		return fmt.Errorf("%w: the object names a member more than once", ErrBadPayload)
	}
	return nil
}

// eventID reads the deduplication key.
func (v *Verifier) eventID(r Request, doc *document) (string, error) {
	p := v.preset
	var id string
	switch {
	case p.EventID.Field != "":
		var err error
		if id, err = idFields(doc, p.EventID.Field); err != nil {
			if errors.Is(err, ErrBadPayload) && !errors.Is(err, errNotScalar) {
				return "", err
			}
			return "", fmt.Errorf("%w: %w", ErrNoEventID, err)
		}
	case p.EventID.Header != "":
		if id = v.header(r.Header, p.EventID.Header); id == "" {
			return "", fmt.Errorf("%w: no %s header", ErrNoEventID, p.EventID.Header)
		}
	default:
		var err error
		if id, err = v.digestID(r); err != nil {
			return "", err
		}
	}
	if !utf8.ValidString(id) {
		// Distinct ids must not collapse into one key when decoded.
		return "", fmt.Errorf("%w: event id is not valid UTF-8", ErrBadPayload)
	}
	return id, nil
}

// unsigned names what of d the sender's MAC does not cover, from where each
// field comes from: exactly the labels Delivery.Unsigned documents.
func (v *Verifier) unsigned(d Delivery) []string {
	p := v.preset
	// A token binds no bytes of the delivery; Mailgun's MAC covers its
	// timestamp and token, not the event beside them.
	bodySigned := p.Family != preset.FamilyToken && p.Family != preset.FamilyBodySignature
	var out []string
	if p.Family == preset.FamilyToken {
		out = append(out, "id") // the digest of a body the token does not bind
	}
	if d.DeliveryID != "" {
		out = append(out, "delivery_id")
	}
	switch {
	case p.EventType.Header != "" && !v.headerSigned(p.EventType.Header):
		out = append(out, "type")
	case p.EventType.Field != "" && !bodySigned:
		out = append(out, "type")
	}
	if p.ObjectField != "" && !bodySigned {
		out = append(out, "object_id")
	}
	if !bodySigned {
		out = append(out, "payload")
	}
	return out
}

// readsBody reports whether the preset reads anything from the JSON body.
func readsBody(p preset.Preset) bool {
	return p.EventID.Field != "" || p.EventType.Field != "" || p.ObjectField != "" || p.FormPayloadField != ""
}

// parse returns the JSON document a delivery carries, read in one pass: the
// body; the JSON of the form field Preset.FormPayloadField for a
// form-encoded delivery; for another form body of a form-signing sender, a
// JSON object of its parameters (a repeated name's values as an array).
func (v *Verifier) parse(r Request) *document {
	p := v.preset
	readsForm := p.FormPayloadField != "" || layoutUses(v.layout, phForm)
	form := readsForm && isForm(v.header(r.Header, "content-type"))
	switch {
	case form && p.FormPayloadField != "":
		values, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return &document{err: fmt.Errorf("%w: form body: %s", ErrBadPayload, quote(err.Error()))}
		}
		return scanJSON([]byte(values.Get(p.FormPayloadField)), v.body)
	case form && layoutUses(v.layout, phForm):
		if doc := scanJSON(r.Body, v.body); doc.err == nil {
			return doc
		}
		obj, err := formObject(r.Body)
		if err != nil {
			return &document{err: err}
		}
		return scanJSON(obj, v.body)
	}
	return scanJSON(r.Body, v.body)
}

// formObject is a JSON object of a form body's parameters.
func formObject(body []byte) ([]byte, error) {
	values, err := url.ParseQuery(string(body))
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

// payload is the document the sink receives: the body, less the sender's
// signature material when it travels inside (Mailgun's signature object).
func (v *Verifier) payload(doc *document) ([]byte, error) {
	field, _, inside := strings.Cut(v.preset.SignatureField, ".")
	if !inside && v.preset.SignatureField != "" {
		field = v.preset.SignatureField
	}
	if field == "" {
		return doc.raw, nil
	}
	m, ok := doc.member(field)
	if !ok {
		// The document's compact copy goes back to the pool with it.
		return bytes.Clone(doc.compact), nil
	}
	// Cut the member and the comma that joins it to its neighbour.
	out := make([]byte, 0, len(doc.compact))
	start, end := m.start, m.end
	if end < len(doc.compact) && doc.compact[end] == ',' {
		end++
	} else if start > 0 && doc.compact[start-1] == ',' {
		start--
	}
	out = append(append(out, doc.compact[:start]...), doc.compact[end:]...)
	return out, nil
}

// fingerprint is the SHA-256 of what identifies the event's content: the
// body; the body without the members the sender re-stamps (DigestOmits); or
// the compact JSON of the members that describe the event
// (FingerprintFields), sorted by name, so that white space and the members
// describing the delivery do not count.
func (v *Verifier) fingerprint(r Request, doc *document) ([32]byte, error) {
	p := v.preset
	switch {
	case len(p.FingerprintFields) > 0:
		h := sha256.New()
		h.Write([]byte{'{'})
		first, next := true, 0
		for _, name := range v.fingerprintFields {
			m, ok := doc.memberAfter(name, &next)
			if !ok {
				continue
			}
			if !first {
				h.Write([]byte{','})
			}
			first = false
			h.Write(doc.compact[m.start:m.end])
		}
		h.Write([]byte{'}'})
		var sum [32]byte
		h.Sum(sum[:0])
		return sum, nil
	case len(p.DigestOmits) > 0:
		// The sender re-stamps these members on each attempt: the
		// fingerprint, like the key, leaves them out.
		content, err := omitMembers(r.Body, p.DigestOmits)
		if err != nil {
			return [32]byte{}, err
		}
		return sha256.Sum256(content), nil
	}
	return sha256.Sum256(r.Body), nil
}

// headerSigned reports whether the signature covers header name.
func (v *Verifier) headerSigned(name string) bool {
	p := v.preset
	return (name == p.IDHeader && layoutUses(v.layout, phID)) ||
		(name == p.TimestampHeader && layoutUses(v.layout, phTimestamp))
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
		if body, err = omitMembers(r.Body, v.preset.DigestOmits); err != nil {
			return "", err
		}
	}
	switch v.preset.Family {
	case preset.FamilyToken, preset.FamilyBodySignature, preset.FamilyPublicKey:
		return digestKey(body), nil
	}
	vals, err := v.signedValues(r, "")
	if err != nil {
		return "", err
	}
	if layoutUses(v.layout, phURL) {
		vals[phURL] = v.signedURL(urlWithoutPort(r.URL))
	}
	vals[phBody] = body
	return digestKey(renderLayout(v.layout, vals)), nil
}

// omitMembers re-encodes a JSON body without the named members, at any
// depth (Linear's webhookTimestamp, HubSpot's attemptNumber). It decodes the
// body a second time, for those two senders only.
func omitMembers(body []byte, names []string) ([]byte, error) {
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
