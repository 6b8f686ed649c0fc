package preset

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// HMACName is the name of the configurable verifier, whose preset comes from
// an HMAC configuration rather than from the table.
const HMACName = "hmac"

// WhsecPrefix precedes the base64 key in a Standard Webhooks signing secret
// ("whsec_<base64>").
const WhsecPrefix = "whsec_"

// ErrInvalidWhsec means a Standard Webhooks secret does not decode to a key.
var ErrInvalidWhsec = errors.New("a Standard Webhooks secret is whsec_<base64> of a non-empty key")

// DecodeWhsec returns the HMAC key a Standard Webhooks secret encodes: the
// base64 after the optional "whsec_" prefix, padded or not, as the reference
// libraries accept it.
func DecodeWhsec(secret string) ([]byte, error) {
	encoded := strings.TrimPrefix(secret, WhsecPrefix)
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(encoded)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidWhsec, err)
	}
	if len(key) == 0 {
		return nil, ErrInvalidWhsec
	}
	return key, nil
}

// DevSecret returns the public development secret of the sender called name
// (a preset name or HMACName), as a verifier is configured with it: the bytes
// "dev-<name>-secret" for a shared secret or token, written as the sender
// writes its secrets (a Standard Webhooks "whsec_" secret); for a public-key
// sender, the public key of the private key DevKeySeed derives.
func DevSecret(name string) string {
	seed := devSeed(name)
	p, _ := Lookup(name)
	switch {
	case p.Family == FamilyPublicKey && p.Algorithm == Ed25519:
		return hex.EncodeToString(ed25519.NewKeyFromSeed(DevKeySeed(name)).Public().(ed25519.PublicKey))
	case p.Family == FamilyPublicKey && p.Algorithm == ECDSAP256:
		key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), DevKeySeed(name))
		if err != nil {
			return seed
		}
		der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return seed
		}
		return base64.StdEncoding.EncodeToString(der)
	case p.SecretFormat == SecretWhsec:
		return WhsecPrefix + base64.StdEncoding.EncodeToString([]byte(seed))
	case p.Family == FamilyItemHMAC:
		return hex.EncodeToString([]byte(seed)) // Adyen's HMAC keys are hex
	}
	return seed
}

// devSeed is the text every development secret is made from.
func devSeed(name string) string { return "dev-" + name + "-secret" }

// DevKeySeed is the 32-byte seed of a development private key: the SHA-256
// of "dev-<name>-secret" (the Ed25519 seed, or the ECDSA P-256 scalar).
func DevKeySeed(name string) []byte {
	sum := sha256.Sum256([]byte(devSeed(name)))
	return sum[:]
}

// IsDevSecret reports whether secret, configured for preset p, is the
// development secret of any sender (DevSecret, or its seed text), and whose.
// A Standard Webhooks secret is compared by the key it decodes to, since
// prefix and padding are optional.
func IsDevSecret(p Preset, secret string) (string, bool) {
	key, keyErr := DecodeWhsec(secret)
	hexKey, hexErr := hex.DecodeString(secret)
	for _, name := range append(Names(), HMACName) {
		if secret == DevSecret(name) || secret == devSeed(name) {
			return name, true
		}
		if p.SecretFormat == SecretWhsec && keyErr == nil && string(key) == devSeed(name) {
			return name, true
		}
		if p.Family == FamilyItemHMAC && hexErr == nil && string(hexKey) == devSeed(name) {
			return name, true
		}
	}
	return "", false
}
