package webhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	"github.com/idemlambda/idem/internal/preset"
)

// HubSpot's older signatures (preset.LegacyScheme), accepted only with
// Preset.AllowLegacySignatures and only when the current signature (v3) is
// absent. As @hubspot/api-client computes them (src/utils/signature.ts):
//
//	v1: hex SHA-256 of secret + body
//	v2: hex SHA-256 of secret + method + URL + body
//
// Neither signs a time, so neither has a tolerance: a captured delivery
// stays valid for ever, and once its result has expired it runs again.
// Neither is an HMAC. And v1 does not sign the URL.

// usesLegacySignature reports whether r is to be verified by the preset's
// legacy scheme: allowed, and the current signature header absent.
func (v *Verifier) usesLegacySignature(r Request) bool {
	p := v.preset
	return p.AllowLegacySignatures && p.Legacy.SignatureHeader != "" && v.header(r.Header, p.SignatureHeader) == ""
}

// legacyNotAllowed returns an error naming the setting when r carries only a
// legacy signature that the preset does not accept, nil otherwise.
func (v *Verifier) legacyNotAllowed(r Request) error {
	p := v.preset
	if p.Legacy.SignatureHeader == "" || p.AllowLegacySignatures || v.header(r.Header, p.SignatureHeader) != "" ||
		v.header(r.Header, p.Legacy.SignatureHeader) == "" {
		return nil
	}
	return fmt.Errorf("%w: no %s header; the delivery carries a %s %s signature, which this preset accepts only with AllowLegacySignatures",
		ErrNotSigned, p.SignatureHeader, p.Legacy.SignatureHeader, quote(v.header(r.Header, p.Legacy.VersionHeader)))
}

// verifyLegacy verifies a v1 or v2 signature against every secret and, for
// v2, every spelling of the public URL (schemeURLSpellings).
func (v *Verifier) verifyLegacy(r Request) (int, error) {
	p := v.preset
	raw := v.header(r.Header, p.Legacy.SignatureHeader)
	if raw == "" {
		return -1, fmt.Errorf("%w: no %s or %s header", ErrNotSigned, p.SignatureHeader, p.Legacy.SignatureHeader)
	}
	sig, ok := decodeSignature(raw, preset.Hex, sha256.Size)
	if !ok {
		return -1, fmt.Errorf("%w: %s is not a hex SHA-256", ErrInvalidHeader, p.Legacy.SignatureHeader)
	}
	// @hubspot/api-client takes v1 when no version is given.
	version := v.header(r.Header, p.Legacy.VersionHeader)
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
		for _, u := range urlSpellings(r.URL) {
			suffixes = append(suffixes, append([]byte(method+u), r.Body...))
		}
	default:
		return -1, fmt.Errorf("%w: %s is %s, not v1 or v2", ErrInvalidHeader, p.Legacy.VersionHeader, quote(version))
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
	return -1, fmt.Errorf("%w: %s %s signature checked against %d secret(s)", ErrNoValidSignature, p.Legacy.SignatureHeader, cmpVersion(version), len(v.keys))
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
		if body, err = omitMembers(r.Body, v.preset.DigestOmits); err != nil {
			return "", err
		}
	}
	return digestKey(body), nil
}
