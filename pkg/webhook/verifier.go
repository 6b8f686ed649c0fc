package webhook

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemlambda/idem/internal/preset"
)

// Verifier verifies one sender's deliveries against a set of secrets. It is
// safe for concurrent use.
type Verifier struct {
	preset    preset.Preset
	layout    []layoutPart
	sigFormat headerFormat
	tolerance time.Duration
	macSize   int      // the MAC length of the preset's algorithm, in bytes
	keys      [][]byte // HMAC keys, or tokens
	edKeys    []ed25519.PublicKey
	ecKeys    []*ecdsa.PublicKey
	canonical map[string]string // lower-case header names, canonical
	body      bodyPlan
	// fingerprintFields are the preset's FingerprintFields, sorted.
	fingerprintFields []string
	// macs are the keyed HMACs of keys, per algorithm (newMACPools).
	macs [len(macAlgorithms)][]*sync.Pool
}

// The application builds from a row with an option New does not offer (internal/config:
// WEBHOOK_ALLOW_LEGACY_SIGNATURES), through the internal preset package.
func init() {
	preset.NewVerifier = func(p preset.Preset, secrets []string, tolerance time.Duration) (any, error) {
		return newVerifier(p, secrets, tolerance)
	}
}

// newVerifier returns a verifier for p accepting any of secrets.
func newVerifier(p preset.Preset, secrets []string, tolerance time.Duration) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w for %s", ErrNoSecret, p.Name)
	}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("%w for %s: secret %d is empty", ErrNoSecret, p.Name, i+1)
		}
	}
	if tolerance < 0 {
		return nil, fmt.Errorf("%w: %s is negative", ErrInvalidTolerance, tolerance)
	}
	if tolerance > 0 && p.Tolerance > 0 && tolerance >= p.ResultTTL {
		return nil, fmt.Errorf("%w: %s is not below the retention of %s, after which a replayed delivery would run again", ErrInvalidTolerance, tolerance, p.ResultTTL)
	}
	if err := validatePreset(p); err != nil {
		return nil, err
	}
	v := &Verifier{preset: p, tolerance: p.Tolerance, macSize: hashOf(p.Algorithm)().Size()}
	if tolerance > 0 {
		v.tolerance = tolerance
	}
	var err error
	if hasLayout(p) {
		if v.layout, err = parseLayout(p.Layout); err != nil {
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
		}
	}
	if v.sigFormat, err = parseHeaderFormat(p.HeaderFormat); err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	for i, s := range secrets {
		if err := v.addSecret(s); err != nil {
			return nil, fmt.Errorf("%s secret %d: %w", p.Name, i+1, err)
		}
	}
	v.macs = newMACPools(p.Family, v.keys)
	v.canonical = canonicalNames(p)
	v.body = planBody(p)
	v.fingerprintFields = slices.Sorted(slices.Values(p.FingerprintFields))
	return v, nil
}

// canonicalNames maps each header name p reads to its canonical form, so
// that reading one costs no allocation.
func canonicalNames(p preset.Preset) map[string]string {
	names := []string{"content-type", twitchMessageTypeHeader, p.SignatureHeader, p.TimestampHeader, p.IDHeader, p.EventID.Header, p.EventType.Header,
		p.SignatureSettingsHeader, p.Legacy.SignatureHeader, p.Legacy.VersionHeader}
	names = append(names, p.DeliveryIDHeaders...)
	for name, alias := range p.HeaderAliases {
		names = append(names, name, alias)
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		if n != "" {
			out[n] = textproto.CanonicalMIMEHeaderKey(n)
		}
	}
	return out
}

// header returns the first value of the header called name (lower-case).
func (v *Verifier) header(h http.Header, name string) string {
	key, ok := v.canonical[name]
	if !ok {
		return h.Get(name)
	}
	if vals := h[key]; len(vals) > 0 {
		return vals[0]
	}
	return ""
}

// validatePreset reports a preset whose fields contradict its family.
func validatePreset(p preset.Preset) error {
	if err := validateFamily(p); err != nil {
		return fmt.Errorf("preset %s: %w", p.Name, err)
	}
	if err := validateSources(p); err != nil {
		return fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return nil
}

// validateFamily checks what p's family needs.
func validateFamily(p preset.Preset) error {
	if err := validateAlgorithm(p); err != nil {
		return err
	}
	if p.AllowLegacySignatures && p.Legacy.SignatureHeader == "" {
		return errors.New("the sender has no legacy signatures to allow")
	}
	if p.Family != preset.FamilyBodySignature && p.Family != preset.FamilyItemHMAC && p.SignatureHeader == "" {
		return errors.New("no signature header")
	}
	need := map[preset.Family]string{
		preset.FamilyTimestampHMAC: "{timestamp}",
		preset.FamilyMessageHMAC:   "{id}",
		preset.FamilyURLHMAC:       "{url}",
	}
	if ph, ok := need[p.Family]; ok && !strings.Contains(p.Layout, ph) {
		return fmt.Errorf("a %s layout must contain %s", p.Family, ph)
	}
	return nil
}

// validateAlgorithm checks that p's algorithm and encoding suit its family.
func validateAlgorithm(p preset.Preset) error {
	switch p.Family {
	case preset.FamilyBodyHMAC, preset.FamilyTimestampHMAC, preset.FamilyMessageHMAC, preset.FamilyURLHMAC:
		if !slices.Contains([]preset.Algorithm{preset.SHA1, preset.SHA256, preset.SHA512}, p.Algorithm) {
			return fmt.Errorf("algorithm %q is not sha1, sha256 or sha512", p.Algorithm)
		}
		if p.Encoding != preset.Hex && p.Encoding != preset.Base64 {
			return fmt.Errorf("encoding %q is not hex or base64", p.Encoding)
		}
	case preset.FamilyPublicKey:
		if p.Algorithm != preset.Ed25519 && p.Algorithm != preset.ECDSAP256 {
			return fmt.Errorf("algorithm %q is not %s or %s", p.Algorithm, preset.Ed25519, preset.ECDSAP256)
		}
	case preset.FamilyToken:
	case preset.FamilyBodySignature:
		if p.SignatureField == "" || p.TokenField == "" || p.TimestampField == "" {
			return errors.New("a body signature needs its signature, token and timestamp fields")
		}
	case preset.FamilyItemHMAC:
		if err := validateItems(p); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown family %q", p.Family)
	}
	return nil
}

// validateSources checks where p's signed values and keys come from, and
// that its retention outlasts its tolerance: a delivery replayed after its
// result expired must be too old to verify.
func validateSources(p preset.Preset) error {
	signsTimestamp := p.TimestampHeader != "" || p.TimestampField != "" || strings.Contains(p.HeaderFormat, "{timestamp}")
	for _, rule := range []struct {
		broken bool
		why    string
	}{
		{strings.Contains(p.Layout, "{id}") && p.IDHeader == "", "layout has {id} but no id header is named"},
		{strings.Contains(p.Layout, "{timestamp}") && !signsTimestamp, "layout has {timestamp} but the timestamp has no source"},
		{p.Tolerance > 0 && !signsTimestamp, "a tolerance needs a signed timestamp"},
		{p.EventID.Header != "" && (p.EventID.Header != p.IDHeader || !strings.Contains(p.Layout, "{id}")), "an event id header must be the signed id header"},
		{p.Family == preset.FamilyToken && p.EventID.Field != "", "a token signs no body field; take the event id from the digest"},
		{p.ResultTTL <= 0, "no retention"},
	} {
		if rule.broken {
			return errors.New(rule.why)
		}
	}
	if p.Tolerance >= p.ResultTTL {
		return fmt.Errorf("retention %s does not exceed tolerance %s", p.ResultTTL, p.Tolerance)
	}
	return nil
}

// withAliases returns r with the aliased headers (Preset.HeaderAliases) read
// under their canonical names, when the canonical set is incomplete and the
// aliased one complete.
func (v *Verifier) withAliases(r Request) Request {
	aliases := v.preset.HeaderAliases
	if len(aliases) == 0 {
		return r
	}
	canonicalComplete, aliasComplete := true, true
	for name, alias := range aliases {
		canonicalComplete = canonicalComplete && v.header(r.Header, name) != ""
		aliasComplete = aliasComplete && v.header(r.Header, alias) != ""
	}
	if canonicalComplete || !aliasComplete {
		return r
	}
	h := r.Header.Clone()
	for name, alias := range aliases {
		h[v.canonical[name]] = []string{v.header(r.Header, alias)}
	}
	r.Header = h
	return r
}

// ResultTTL is how long a completed result must be kept so that it outlives
// every retry the sender can still make (HMACConfig.ResultTTL for the
// configurable verifier). It always exceeds the tolerance.
func (v *Verifier) ResultTTL() time.Duration { return v.preset.ResultTTL }

// Verify checks r's signature against every accepted secret and returns the
// verified delivery: its deduplication key, type, object, labels, payload
// and fingerprint, or the answer to an endpoint handshake.
//
// A delivery the sender did not sign is an error wrapping ErrNotSigned,
// ErrInvalidHeader, ErrNoValidSignature, ErrTooOld, ErrTooNew or
// ErrNoPublicURL: reject it (401). A signed delivery that is not the event
// the sender sends is an error wrapping ErrBadPayload (the body is not its
// JSON, is ambiguous, or is no JSON document at all) or ErrNoEventID (400).
// Errors never quote a header value.
func (v *Verifier) Verify(r Request) (Delivery, error) {
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r = v.withAliases(r)
	if v.preset.Family == preset.FamilyItemHMAC {
		// Several events, each signed on its own (adyen.go).
		return v.verifyItemsDelivery(r)
	}
	var doc *document
	// What the delivery holds is copied out of the document, or aliases the body.
	defer func() { releaseDocument(doc) }()
	if v.preset.Family == preset.FamilyBodySignature || v.preset.TimestampField != "" {
		// The signature or its timestamp travels in the body: read it
		// first (a body that is not JSON carries no signature).
		doc = v.parse(r)
	}
	secret, err := v.verify(r, doc)
	if err != nil {
		if !isSignatureError(err) {
			// The signed content could not even be built (a form body that
			// does not parse): no signature matches it.
			err = fmt.Errorf("%w: %w", ErrNoValidSignature, err)
		}
		return Delivery{}, err
	}
	if doc == nil {
		doc = v.parse(r)
	}
	return v.delivery(r, doc, secret)
}

// verify returns the index of the secret that verified r (-1 for
// WooCommerce's unsigned ping).
func (v *Verifier) verify(r Request, doc *document) (int, error) {
	if v.preset.Handshake == preset.HandshakeWooCommercePing && v.isWooCommercePing(r) {
		return -1, nil
	}
	if v.usesLegacySignature(r) {
		return v.verifyLegacy(r)
	}
	if err := v.legacyNotAllowed(r); err != nil {
		return -1, err
	}
	switch v.preset.Family {
	case preset.FamilyItemHMAC:
		return v.verifyItems(r)
	case preset.FamilyToken:
		return v.verifyToken(r)
	case preset.FamilyPublicKey:
		return v.verifyPublicKey(r, doc)
	case preset.FamilyBodySignature:
		return v.verifyBodySignature(r, doc)
	default:
		return v.verifyHMAC(r, doc)
	}
}

// isSignatureError reports an error that says the delivery is not signed as
// its sender signs.
func isSignatureError(err error) bool {
	for _, target := range []error{ErrNotSigned, ErrInvalidHeader, ErrNoValidSignature, ErrTooOld, ErrTooNew, ErrNoPublicURL} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// hasLayout reports whether p's signed content is a Layout: every family but
// a token (nothing signed) and an item HMAC (fixed fields of each item).
func hasLayout(p preset.Preset) bool {
	return p.Family != preset.FamilyToken && p.Family != preset.FamilyItemHMAC
}

// isHMACFamily reports the four families whose signature is an HMAC under
// the secrets (verifyHMAC).
func isHMACFamily(f preset.Family) bool {
	switch f {
	case preset.FamilyBodyHMAC, preset.FamilyTimestampHMAC, preset.FamilyMessageHMAC, preset.FamilyURLHMAC:
		return true
	}
	return false
}
