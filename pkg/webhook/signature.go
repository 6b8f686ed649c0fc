package webhook

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idemlambda/idem/internal/preset"
	"hash"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// placeholder is a placeholder of a Layout, or phLiteral for literal text.
type placeholder int

// The placeholders, in the order layoutPlaceholders names them.
const (
	phLiteral placeholder = iota
	phBody
	phTimestamp
	phID
	phURL
	phMethod
	phForm
	phToken
	numPlaceholders
)

// layoutPlaceholders are the placeholders' names, as a Layout writes them
// between braces.
var layoutPlaceholders = [numPlaceholders]string{
	phBody: "body", phTimestamp: "timestamp", phID: "id", phURL: "url", phMethod: "method", phForm: "form", phToken: "token",
}

// layoutPart is literal text or a placeholder of a Layout.
type layoutPart struct {
	literal     string
	placeholder placeholder
	// bytes is the literal as bytes, to write to a hash without a conversion.
	bytes []byte
}

// parseLayout splits a Layout into literals and placeholders.
func parseLayout(layout string) ([]layoutPart, error) {
	if layout == "" {
		return nil, errors.New("empty layout")
	}
	var parts []layoutPart
	rest := layout
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			parts = append(parts, layoutPart{literal: rest})
			break
		}
		if open > 0 {
			parts = append(parts, layoutPart{literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("layout %q: unclosed {", layout)
		}
		name := rest[open+1 : open+end]
		ph := slices.Index(layoutPlaceholders[:], name)
		if ph <= int(phLiteral) {
			return nil, fmt.Errorf("layout %q: unknown placeholder {%s} (known: {%s})", layout, name, strings.Join(layoutPlaceholders[phLiteral+1:], "}, {"))
		}
		parts = append(parts, layoutPart{placeholder: placeholder(ph)})
		rest = rest[open+end+1:]
	}
	for i := range parts {
		parts[i].bytes = []byte(parts[i].literal)
	}
	return parts, nil
}

// layoutUses reports whether the layout has the placeholder ph.
func layoutUses(parts []layoutPart, ph placeholder) bool {
	return slices.ContainsFunc(parts, func(p layoutPart) bool { return p.placeholder == ph })
}

// signedValues are what a layout's placeholders stand for in one request,
// indexed by placeholder.
type signedValues [numPlaceholders][]byte

// renderLayout writes the signed content.
func renderLayout(parts []layoutPart, vals signedValues) []byte {
	n := 0
	for _, p := range parts {
		n += len(p.literal) + len(vals[p.placeholder])
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		if p.placeholder == phLiteral {
			out = append(out, p.literal...)
		} else {
			out = append(out, vals[p.placeholder]...)
		}
	}
	return out
}

// headerFormat is a parsed Preset.HeaderFormat. A zero value is a bare
// signature.
type headerFormat struct {
	// version, set for a versioned list ("v1,{signature}"), is the version
	// an entry must carry; entries are space-separated "<version>,<sig>".
	version      string
	separator    string
	timestampKey string
	signatureKey string
}

// parseHeaderFormat parses "<tkey>={timestamp}<sep><skey>={signature}" (in
// either order), "<version>,{signature}", or "" for a bare signature.
func parseHeaderFormat(format string) (headerFormat, error) {
	if format == "" || format == "{signature}" {
		return headerFormat{}, nil
	}
	if version, ok := strings.CutSuffix(format, ",{signature}"); ok && version != "" && !strings.ContainsAny(version, " ,={}") {
		return headerFormat{version: version, separator: " "}, nil
	}
	for _, sep := range []string{",", ";", " ", "&"} {
		if f, ok := keyedFormat(format, sep); ok {
			return f, nil
		}
	}
	return headerFormat{}, fmt.Errorf("header format %q is neither {signature} nor <key>={timestamp}<sep><key>={signature} with sep one of , ; space &", format)
}

// keyedFormat reads format as two key=value entries joined by sep, one
// {timestamp} and one {signature}.
func keyedFormat(format, sep string) (headerFormat, bool) {
	entries := strings.Split(format, sep)
	if len(entries) != 2 {
		return headerFormat{}, false
	}
	f := headerFormat{separator: sep}
	for _, e := range entries {
		key, value, ok := strings.Cut(e, "=")
		switch {
		case !ok || key == "":
		case value == "{timestamp}":
			f.timestampKey = key
		case value == "{signature}":
			f.signatureKey = key
		}
	}
	return f, f.timestampKey != "" && f.signatureKey != "" && f.timestampKey != f.signatureKey
}

// maxSignatureEntries bounds the signature entries read from one header, so a
// hostile header costs bounded work.
const maxSignatureEntries = 16

// inlineSignatures is how many signatures a parsedSignature holds without
// an allocation: a sender rotating its secret signs with two.
const inlineSignatures = 4

// parsedSignature is what a signature header yields: its timestamp, and n
// signatures of size bytes each (signature).
type parsedSignature struct {
	timestamp string
	n, size   int
	inline    [inlineSignatures * sha512.Size]byte
	extra     [][]byte // the signatures after the inline ones
}

// add decodes encoded as the next signature; a signature that does not
// decode is not added.
func (p *parsedSignature) add(encoded string, enc preset.Encoding, size int) bool {
	p.size = size
	if p.n < inlineSignatures {
		at := p.n * size
		if _, ok := appendSignature(p.inline[at:at], encoded, enc, size); !ok {
			return false
		}
	} else {
		sig, ok := decodeSignature(encoded, enc, size)
		if !ok {
			return false
		}
		p.extra = append(p.extra, sig)
	}
	p.n++
	return true
}

// signature returns the signature i, i < n.
func (p *parsedSignature) signature(i int) []byte {
	if i < inlineSignatures {
		return p.inline[i*p.size : (i+1)*p.size]
	}
	return p.extra[i-inlineSignatures]
}

// parseSignature reads the signatures (and, in a keyed list, the
// timestamp) from a signature header value. Malformed entries of a keyed
// list are skipped, as the senders' SDKs skip them; a bare signature that
// does not decode is an error.
func parseSignature(value string, f headerFormat, prefix string, enc preset.Encoding, size int) (parsedSignature, error) {
	switch {
	case f.separator == "":
		encoded, ok := strings.CutPrefix(value, prefix)
		if !ok {
			return parsedSignature{}, fmt.Errorf("%w: signature does not start with %q", ErrInvalidHeader, prefix)
		}
		var out parsedSignature
		if !out.add(encoded, enc, size) {
			return parsedSignature{}, fmt.Errorf("%w: signature is not a %s MAC of %d bytes", ErrInvalidHeader, enc, size)
		}
		return out, nil
	case f.version != "":
		return parseVersioned(value, f, prefix, enc, size)
	}
	return parseKeyed(value, f, prefix, enc, size)
}

// parseVersioned reads a Standard Webhooks list, "v1,<sig> v1,<sig>
// v1a,<sig>": another version or an entry that does not decode is a
// non-match.
func parseVersioned(value string, f headerFormat, prefix string, enc preset.Encoding, size int) (parsedSignature, error) {
	var out parsedSignature
	for entry := range strings.SplitSeq(value, f.separator) {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok || version != f.version || out.n == maxSignatureEntries {
			continue
		}
		out.add(strings.TrimPrefix(encoded, prefix), enc, size)
	}
	if out.n == 0 {
		return parsedSignature{}, fmt.Errorf("%w: no well-formed %s entry", ErrNoValidSignature, f.version)
	}
	return out, nil
}

// parseKeyed reads a keyed list such as "t=<ts>,v1=<sig>,v1=<sig>": every
// element is key=value, as stripe-go's parser requires; an unknown key is
// ignored, a second timestamp is an error.
func parseKeyed(value string, f headerFormat, prefix string, enc preset.Encoding, size int) (parsedSignature, error) {
	var out parsedSignature
	for entry := range strings.SplitSeq(value, f.separator) {
		key, val, ok := strings.Cut(entry, "=")
		switch {
		case !ok || key == "":
			return parsedSignature{}, fmt.Errorf("%w: element %s is not key=value", ErrInvalidHeader, quote(entry))
		case key == f.timestampKey && out.timestamp != "":
			return parsedSignature{}, fmt.Errorf("%w: more than one %s=", ErrInvalidHeader, f.timestampKey)
		case key == f.timestampKey && val == "":
			return parsedSignature{}, fmt.Errorf("%w: empty %s=", ErrInvalidHeader, f.timestampKey)
		case key == f.timestampKey:
			out.timestamp = val
		case key == f.signatureKey && out.n < maxSignatureEntries:
			out.add(strings.TrimPrefix(val, prefix), enc, size)
		}
	}
	if out.timestamp == "" {
		return parsedSignature{}, fmt.Errorf("%w: no %s= timestamp", ErrInvalidHeader, f.timestampKey)
	}
	if out.n == 0 {
		return parsedSignature{}, fmt.Errorf("%w: no well-formed %s= signature", ErrNoValidSignature, f.signatureKey)
	}
	return out, nil
}

// decodeSignature decodes a signature of size bytes; only the canonical
// encoding passes (padded standard base64, hex of either case).
func decodeSignature(s string, enc preset.Encoding, size int) ([]byte, bool) {
	return appendSignature(make([]byte, 0, size), s, enc, size)
}

// appendSignature appends to dst the signature s decodes to, as
// decodeSignature decodes it; a hex one costs no allocation beyond dst's.
func appendSignature(dst []byte, s string, enc preset.Encoding, size int) ([]byte, bool) {
	switch enc {
	case preset.Hex:
		if len(s) != 2*size {
			return dst, false
		}
		for i := 0; i < len(s); i += 2 {
			hi, ok1 := fromHex(s[i])
			lo, ok2 := fromHex(s[i+1])
			if !ok1 || !ok2 {
				return dst, false
			}
			dst = append(dst, hi<<4|lo)
		}
		return dst, true
	case preset.Base64:
		if len(s) != base64.StdEncoding.EncodedLen(size) {
			return dst, false
		}
		n := len(dst)
		out, err := base64.StdEncoding.Strict().AppendDecode(dst, []byte(s))
		return out, err == nil && len(out)-n == size
	}
	return dst, false
}

// fromHex is the value of a hex digit of either case.
func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// hashOf returns the hash constructor of an HMAC algorithm.
func hashOf(a preset.Algorithm) func() hash.Hash {
	switch a {
	case preset.SHA1:
		return sha1.New
	case preset.SHA512:
		return sha512.New
	default:
		return sha256.New
	}
}

// mac is the HMAC of content under key with the preset's algorithm.
func mac(a preset.Algorithm, key, content []byte) []byte {
	m := hmac.New(hashOf(a), key)
	m.Write(content)
	return m.Sum(nil)
}

// macAlgorithms are the algorithms of the HMAC families, in the order of
// Verifier.macs.
var macAlgorithms = [...]preset.Algorithm{preset.SHA1, preset.SHA256, preset.SHA512}

// newMACPools returns, for an HMAC family, per algorithm of macAlgorithms and
// per key, a pool of HMACs keyed once: a delivery then costs no keying and no
// allocation of its own (hmac.Reset returns a used one to its keyed state).
func newMACPools(f preset.Family, keys [][]byte) [len(macAlgorithms)][]*sync.Pool {
	var out [len(macAlgorithms)][]*sync.Pool
	if !isHMACFamily(f) {
		return out
	}
	for a, alg := range macAlgorithms {
		for _, key := range keys {
			out[a] = append(out[a], &sync.Pool{New: func() any { return &keyedHMAC{Hash: hmac.New(hashOf(alg), key)} }})
		}
	}
	return out
}

// keyedHMAC is a keyed HMAC of a pool, with room for its sum.
type keyedHMAC struct {
	hash.Hash
	sum [sha512.Size]byte
}

// macMatches reports whether the HMAC under the verifier's key i with
// algorithm a of the layout rendered with vals, written part by part
// (mac(a, v.keys[i], renderLayout(v.layout, vals))), is one of sigs'.
func (v *Verifier) macMatches(a preset.Algorithm, i int, vals signedValues, sigs *parsedSignature) bool {
	idx := slices.Index(macAlgorithms[:], a)
	if idx < 0 || i >= len(v.macs[idx]) {
		return sigs.matches(mac(a, v.keys[i], renderLayout(v.layout, vals)))
	}
	pool := v.macs[idx][i]
	m := pool.Get().(*keyedHMAC)
	m.Reset()
	for _, p := range v.layout {
		if p.placeholder == phLiteral {
			m.Write(p.bytes)
		} else {
			m.Write(vals[p.placeholder])
		}
	}
	ok := sigs.matches(m.Sum(m.sum[:0]))
	pool.Put(m)
	return ok
}

// matches reports whether expected is one of the signatures, comparing each
// in constant time.
func (p *parsedSignature) matches(expected []byte) bool {
	for j := range p.n {
		if hmac.Equal(expected, p.signature(j)) {
			return true
		}
	}
	return false
}

// parseTimestamp parses a signed timestamp in the preset's format.
// Decimal formats accept only canonical digits (no sign, no leading zero),
// so the string signed and the time checked cannot disagree.
func parseTimestamp(s string, f preset.TimestampFormat) (time.Time, bool) {
	if f == preset.RFC3339 {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	if !isDecimal(s) {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if f == preset.UnixMilliseconds {
		return time.UnixMilli(n), err == nil
	}
	return time.Unix(n, 0), err == nil
}

// isDecimal reports a non-empty run of digits without a leading zero,
// short enough for int64.
func isDecimal(s string) bool {
	if s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// signatureHeader returns the signature header of r, or an error wrapping
// ErrNotSigned when it is missing.
func (v *Verifier) signatureHeader(r Request) (string, error) {
	raw := v.header(r.Header, v.preset.SignatureHeader)
	if raw == "" {
		return "", fmt.Errorf("%w: no %s header", ErrNotSigned, v.preset.SignatureHeader)
	}
	return raw, nil
}

// signedTimestamp returns the timestamp the signature covers (from the keyed
// signature header, the timestamp header or the body field), checked
// against the tolerance.
func (v *Verifier) signedTimestamp(r Request, doc *document, fromSignature string) (string, error) {
	p := v.preset
	ts := fromSignature
	switch {
	case v.sigFormat.timestampKey != "":
	case p.TimestampHeader != "":
		if ts = v.header(r.Header, p.TimestampHeader); ts == "" {
			return "", fmt.Errorf("%w: no %s header", ErrNotSigned, p.TimestampHeader)
		}
	case p.TimestampField != "":
		var err error
		if ts, err = doc.scalar(p.TimestampField, false); err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrNotSigned, p.TimestampField, err)
		}
	}
	if v.tolerance <= 0 || ts == "" {
		return ts, nil
	}
	signedAt, ok := parseTimestamp(ts, p.TimestampFormat)
	if !ok {
		return "", fmt.Errorf("%w: timestamp is not %s", ErrInvalidHeader, cmp.Or(p.TimestampFormat, preset.UnixSeconds))
	}
	return ts, checkTolerance(signedAt, r.Now, v.tolerance)
}

// verifyHMAC verifies the four HMAC families.
func (v *Verifier) verifyHMAC(r Request, doc *document) (int, error) {
	p := v.preset
	raw, err := v.signatureHeader(r)
	if err != nil {
		return -1, err
	}
	alg, size, err := v.requestAlgorithm(r)
	if err != nil {
		return -1, err
	}
	sig, err := parseSignature(raw, v.sigFormat, p.Prefix, p.Encoding, size)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", p.SignatureHeader, err)
	}
	ts, err := v.signedTimestamp(r, doc, sig.timestamp)
	if err != nil {
		return -1, err
	}
	vals, err := v.signedValues(r, ts)
	if err != nil {
		return -1, err
	}
	// One content, or for a URL scheme one per accepted spelling of the URL
	// (with and without the scheme's default port, as the senders' SDKs
	// accept).
	spellings := []string{""}
	if layoutUses(v.layout, phURL) {
		spellings = urlSpellings(r.URL)
	}
	for i := range v.keys {
		for _, u := range spellings {
			if u != "" {
				vals[phURL] = v.signedURL(u)
			}
			if v.macMatches(alg, i, vals, &sig) {
				return i, nil
			}
		}
	}
	return -1, fmt.Errorf("%w: %d signature(s) checked against %d secret(s)", ErrNoValidSignature, sig.n, len(v.keys))
}

// signedURL is a spelling of the public URL as the sender signs it.
func (v *Verifier) signedURL(u string) []byte {
	if v.preset.URLDecodeReserved {
		u = decodeReservedURL(u)
	}
	return []byte(u)
}

// signedValues fills the placeholders of the layout from r.
func (v *Verifier) signedValues(r Request, ts string) (signedValues, error) {
	p := v.preset
	vals := signedValues{phBody: r.Body, phTimestamp: []byte(ts)}
	if layoutUses(v.layout, phMethod) {
		vals[phMethod] = []byte(cmp.Or(r.Method, "POST"))
	}
	if layoutUses(v.layout, phID) {
		id := v.header(r.Header, p.IDHeader)
		if id == "" {
			return vals, fmt.Errorf("%w: no %s header", ErrNotSigned, p.IDHeader)
		}
		vals[phID] = []byte(id)
	}
	if layoutUses(v.layout, phURL) {
		if r.URL == "" {
			return vals, ErrNoPublicURL
		}
		vals[phURL] = []byte(r.URL)
		if p.BodyHashParam != "" && !isForm(v.header(r.Header, "content-type")) {
			if err := checkBodyHash(r.URL, p.BodyHashParam, r.Body); err != nil {
				return vals, err
			}
		}
	}
	if layoutUses(v.layout, phForm) && isForm(v.header(r.Header, "content-type")) {
		form, err := canonicalForm(r.Body)
		if err != nil {
			return vals, err
		}
		vals[phForm] = form
	}
	return vals, nil
}

// isForm reports an application/x-www-form-urlencoded content type.
func isForm(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// maxFormParams bounds the parameters of a signed form body.
const maxFormParams = 1000

// canonicalForm returns a form body's parameters sorted by name, each name
// followed by its value (values of a repeated name sorted too), the content
// Twilio signs after the URL. A body that is not a well-formed form is
// ErrBadPayload.
func canonicalForm(body []byte) ([]byte, error) {
	if strings.Count(string(body), "&") >= maxFormParams {
		return nil, fmt.Errorf("%w: more than %d form parameters", ErrBadPayload, maxFormParams)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: form body: %v", ErrBadPayload, err)
	}
	var out []byte
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range form {
			if !yield(k) {
				return
			}
		}
	}) {
		// twilio-node sorts a repeated parameter's values and drops repeats.
		values := slices.Clone(form[name])
		slices.Sort(values)
		values = slices.Compact(values)
		for _, val := range values {
			out = append(out, name...)
			out = append(out, val...)
		}
	}
	return out, nil
}

// checkBodyHash compares the hex SHA-256 of body with the query parameter
// param of rawURL: the URL is signed, and through it the body.
func checkBodyHash(rawURL, param string, body []byte) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%w: public URL does not parse", ErrNoPublicURL)
	}
	want := u.Query().Get(param)
	if want == "" {
		return fmt.Errorf("%w: a JSON body needs the %s query parameter", ErrNotSigned, param)
	}
	sum := sha256.Sum256(body)
	got := hex.EncodeToString(sum[:])
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(want)), []byte(got)) != 1 {
		return fmt.Errorf("%w: body does not match %s", ErrNoValidSignature, param)
	}
	return nil
}

// urlSpellings returns rawURL as given, without its port, and with the
// scheme's default port: senders sign the URL as configured, which a proxy
// may spell differently.
func urlSpellings(rawURL string) []string {
	out := []string{rawURL}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return out
	}
	if u.Port() != "" {
		noPort := *u
		noPort.Host = u.Hostname()
		out = append(out, noPort.String())
		return out
	}
	if port := defaultPorts[u.Scheme]; port != "" {
		withPort := *u
		withPort.Host = u.Host + ":" + port
		out = append(out, withPort.String())
	}
	return out
}

// defaultPorts are the ports a URL of each scheme means when it names none.
var defaultPorts = map[string]string{"https": "443", "http": "80"}

// reservedDecoder decodes the percent-encodings HubSpot decodes before
// signing a URL, in either hex case.
var reservedDecoder = func() *strings.Replacer {
	var pairs []string
	for _, c := range ":/?@!$'()*,;" {
		enc := fmt.Sprintf("%%%02X", c)
		pairs = append(pairs, enc, string(c), strings.ToLower(enc), string(c))
	}
	return strings.NewReplacer(pairs...)
}()

// decodeReservedURL returns rawURL with the percent-encodings of
// : / ? @ ! $ ' ( ) * , ; decoded: the URL HubSpot signs (Preset.URLDecodeReserved).
func decodeReservedURL(rawURL string) string { return reservedDecoder.Replace(rawURL) }

// urlWithoutPort is rawURL without an explicit port.
func urlWithoutPort(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Port() == "" {
		return rawURL
	}
	u.Host = u.Hostname()
	return u.String()
}

// addSecret turns one configured secret into a key of the family.
func (v *Verifier) addSecret(secret string) error {
	p := v.preset
	switch p.Family {
	case preset.FamilyPublicKey:
		return v.addPublicKey(secret)
	case preset.FamilyToken:
		v.keys = append(v.keys, []byte(secret))
		return nil
	case preset.FamilyItemHMAC:
		return v.addItemKey(secret)
	}
	if p.SecretFormat == preset.SecretWhsec {
		key, err := preset.DecodeWhsec(secret)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidSecret, err)
		}
		v.keys = append(v.keys, key)
		return nil
	}
	if p.SecretFormat == preset.SecretHTMLSpecialChars {
		secret = htmlSpecialChars.Replace(secret)
	}
	v.keys = append(v.keys, []byte(secret))
	return nil
}

// htmlSpecialChars decodes what PHP's htmlspecialchars encodes (ENT_QUOTES).
var htmlSpecialChars = strings.NewReplacer("&amp;", "&", "&quot;", `"`, "&#039;", "'", "&#39;", "'", "&lt;", "<", "&gt;", ">")

// maxQuoted bounds the request text an error message quotes: errors reach
// log lines, and request headers are the sender's (or an attacker's) to make
// as long as they like.
const maxQuoted = 256

// quote returns s as a Go-quoted string of at most maxQuoted bytes, followed,
// when it had to be cut, by a marker giving the full length.
func quote(s string) string {
	n := len(s)
	if n > maxQuoted {
		s = s[:maxQuoted]
	}
	q := strconv.Quote(s)
	if len(q) <= maxQuoted && n <= maxQuoted {
		return q
	}
	if len(q) > maxQuoted {
		q = q[:maxQuoted]
	}
	return q + "...(truncated, " + strconv.Itoa(n) + " bytes)"
}

// checkTolerance rejects a signed time further than tolerance from now.
func checkTolerance(signed, now time.Time, tolerance time.Duration) error {
	if d := now.Sub(signed); d > tolerance {
		return fmt.Errorf("%w: signed %s ago, tolerance %s", ErrTooOld, d.Truncate(time.Second), tolerance)
	}
	if d := signed.Sub(now); d > tolerance {
		return fmt.Errorf("%w: signed %s ahead, tolerance %s", ErrTooNew, d.Truncate(time.Second), tolerance)
	}
	return nil
}
