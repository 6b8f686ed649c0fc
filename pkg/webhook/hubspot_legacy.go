package webhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
)

// legacyScheme names the headers of a sender's older signature versions:
// HubSpot's X-HubSpot-Signature, whose version X-HubSpot-Signature-Version
// gives ("v1" or "v2"). A zero value means the sender has none.
//
// As @hubspot/api-client computes them (src/utils/signature.ts):
//
//	v1: hex SHA-256 of secret + body
//	v2: hex SHA-256 of secret + method + URL + body
//
// Neither signs a time, so neither has a tolerance: a captured delivery
// stays valid for ever, and once its result has expired it runs again.
// Neither is an HMAC. And v1 does not sign the URL. That is why a preset
// accepts them only with Preset.AllowLegacySignatures, and only when the
// current signature (v3) is absent.
type legacyScheme struct {
	signatureHeader string
	versionHeader   string
}

// usesLegacySignature reports whether r is to be verified by the preset's
// legacy scheme: allowed, and the current signature header absent.
func (v *Verifier) usesLegacySignature(r Request) bool {
	p := v.preset
	return p.AllowLegacySignatures && p.legacy.signatureHeader != "" && header(r.Headers, p.SignatureHeader) == ""
}

// legacyNotAllowed returns an error naming the setting when r carries only a
// legacy signature that the preset does not accept, nil otherwise.
func (v *Verifier) legacyNotAllowed(r Request) error {
	p := v.preset
	if p.legacy.signatureHeader == "" || p.AllowLegacySignatures || header(r.Headers, p.SignatureHeader) != "" ||
		header(r.Headers, p.legacy.signatureHeader) == "" {
		return nil
	}
	return fmt.Errorf("%w: no %s header; the delivery carries a %s %s signature, which this preset accepts only with AllowLegacySignatures",
		ErrNotSigned, p.SignatureHeader, p.legacy.signatureHeader, quote(header(r.Headers, p.legacy.versionHeader)))
}

// verifyLegacy verifies a v1 or v2 signature against every secret and, for
// v2, every spelling of the public URL (schemeURLSpellings).
func (v *Verifier) verifyLegacy(r Request) (int, error) {
	p := v.preset
	raw := header(r.Headers, p.legacy.signatureHeader)
	if raw == "" {
		return -1, fmt.Errorf("%w: no %s or %s header", ErrNotSigned, p.SignatureHeader, p.legacy.signatureHeader)
	}
	sig, ok := schemeDecodeSig(raw, Hex, sha256.Size)
	if !ok {
		return -1, fmt.Errorf("%w: %s is not a hex SHA-256", ErrInvalidHeader, p.legacy.signatureHeader)
	}
	// @hubspot/api-client takes v1 when no version is given.
	version := header(r.Headers, p.legacy.versionHeader)
	var suffixes [][]byte
	switch version {
	case "", "v1":
		suffixes = [][]byte{r.Body}
	case "v2":
		if r.URL == "" {
			return -1, ErrNoPublicURL
		}
		method := r.Method
		if method == "" {
			method = "POST"
		}
		for _, u := range schemeURLSpellings(r.URL) {
			suffixes = append(suffixes, append([]byte(method+u), r.Body...))
		}
	default:
		return -1, fmt.Errorf("%w: %s is %s, not v1 or v2", ErrInvalidHeader, p.legacy.versionHeader, quote(version))
	}
	for i, key := range v.keys {
		for _, suffix := range suffixes {
			h := sha256.New()
			h.Write(key)
			h.Write(suffix)
			if subtle.ConstantTimeCompare(h.Sum(nil), sig) == 1 {
				return i, nil
			}
		}
	}
	return -1, fmt.Errorf("%w: %s %s signature checked against %d secret(s)", ErrNoValidSignature, p.legacy.signatureHeader, cmpVersion(version), len(v.keys))
}

// cmpVersion names a legacy version for an error message.
func cmpVersion(version string) string {
	if version == "" {
		return "v1"
	}
	return version
}

// legacyDigestID is the deduplication key of a delivery verified by the legacy
// scheme: the digest of the body (less Preset.DigestOmits) alone, since v1
// signs nothing else; a key over the URL would let a replay under another
// query string pass for a new event.
func (v *Verifier) legacyDigestID(r Request) (string, error) {
	body := r.Body
	if len(v.preset.DigestOmits) > 0 {
		var err error
		if body, err = schemeOmit(r.Body, v.preset.DigestOmits); err != nil {
			return "", err
		}
	}
	return BodyDigestID(body), nil
}
