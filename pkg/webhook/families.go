package webhook

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"github.com/idemlambda/idem/internal/preset"
)

// addPublicKey parses a sender's public key: Ed25519 as 64 hex digits (as
// Discord shows it), ECDSA P-256 as base64 DER SubjectPublicKeyInfo (as
// SendGrid shows it).
func (v *Verifier) addPublicKey(secret string) error {
	switch v.preset.Algorithm {
	case preset.Ed25519:
		b, err := hex.DecodeString(secret)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: an Ed25519 public key is %d hex digits", ErrInvalidSecret, 2*ed25519.PublicKeySize)
		}
		v.edKeys = append(v.edKeys, ed25519.PublicKey(b))
	case preset.ECDSAP256:
		der, err := base64.StdEncoding.DecodeString(secret)
		if err != nil {
			return fmt.Errorf("%w: an ECDSA public key is base64 DER: %v", ErrInvalidSecret, err)
		}
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidSecret, err)
		}
		ec, ok := pub.(*ecdsa.PublicKey)
		if !ok || ec.Curve.Params().Name != "P-256" {
			return fmt.Errorf("%w: not an ECDSA P-256 public key", ErrInvalidSecret)
		}
		v.ecKeys = append(v.ecKeys, ec)
	}
	return nil
}

// maxPublicKeySignature bounds a DER ECDSA signature (72 bytes for P-256).
const maxPublicKeySignature = 128

// verifyPublicKey verifies FamilyPublicKey: the layout (timestamp and body)
// signed with the sender's private key.
func (v *Verifier) verifyPublicKey(r Request, doc *document) (int, error) {
	p := v.preset
	raw, err := v.signatureHeader(r)
	if err != nil {
		return -1, err
	}
	ts, err := v.signedTimestamp(r, doc, "")
	if err != nil {
		return -1, err
	}
	vals, err := v.signedValues(r, ts)
	if err != nil {
		return -1, err
	}
	content := renderLayout(v.layout, vals)
	switch p.Algorithm {
	case preset.Ed25519:
		sig, err := hex.DecodeString(raw)
		if err != nil || len(sig) != ed25519.SignatureSize {
			return -1, fmt.Errorf("%w: %s is not a hex Ed25519 signature", ErrInvalidHeader, p.SignatureHeader)
		}
		for i, key := range v.edKeys {
			if ed25519.Verify(key, content, sig) {
				return i, nil
			}
		}
		return -1, fmt.Errorf("%w: checked against %d key(s)", ErrNoValidSignature, len(v.edKeys))
	default:
		if len(raw) > base64.StdEncoding.EncodedLen(maxPublicKeySignature) {
			return -1, fmt.Errorf("%w: %s is too long for an ECDSA signature", ErrInvalidHeader, p.SignatureHeader)
		}
		sig, err := base64.StdEncoding.DecodeString(raw)
		if err != nil {
			return -1, fmt.Errorf("%w: %s is not base64", ErrInvalidHeader, p.SignatureHeader)
		}
		digest := sha256.Sum256(content)
		for i, key := range v.ecKeys {
			if ecdsa.VerifyASN1(key, digest[:], sig) {
				return i, nil
			}
		}
		return -1, fmt.Errorf("%w: checked against %d key(s)", ErrNoValidSignature, len(v.ecKeys))
	}
}

// verifyToken verifies FamilyToken: the header equals a secret. Both sides
// are hashed first so the comparison takes the same time whatever the
// lengths.
func (v *Verifier) verifyToken(r Request) (int, error) {
	raw, err := v.signatureHeader(r)
	if err != nil {
		return -1, err
	}
	got := sha256.Sum256([]byte(raw))
	for i, key := range v.keys {
		want := sha256.Sum256(key)
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: %s matches none of %d token(s)", ErrNoValidSignature, v.preset.SignatureHeader, len(v.keys))
}

// verifyBodySignature verifies FamilyBodySignature: the signature, the
// timestamp and the token are fields of the JSON body (Mailgun), the MAC
// covers the layout of timestamp and token.
func (v *Verifier) verifyBodySignature(r Request, doc *document) (int, error) {
	p := v.preset
	sigText, err := doc.scalar(p.SignatureField, false)
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %w", ErrNotSigned, p.SignatureField, err)
	}
	token, err := doc.scalar(p.TokenField, false)
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %w", ErrNotSigned, p.TokenField, err)
	}
	ts, err := v.signedTimestamp(r, doc, "")
	if err != nil {
		return -1, err
	}
	sig, ok := decodeSignature(sigText, p.Encoding, v.macSize)
	if !ok {
		return -1, fmt.Errorf("%w: %s is not a %s MAC", ErrInvalidHeader, p.SignatureField, p.Encoding)
	}
	vals, err := v.signedValues(r, ts)
	if err != nil {
		return -1, err
	}
	vals[phToken] = []byte(token)
	content := renderLayout(v.layout, vals)
	for i, key := range v.keys {
		if hmac.Equal(mac(p.Algorithm, key, content), sig) {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: checked against %d secret(s)", ErrNoValidSignature, len(v.keys))
}
