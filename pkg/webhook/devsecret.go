package webhook

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
)

// DevSecret returns the public development secret of the sender called name
// (a preset name or HMACPresetName), as a verifier is configured with it: the
// bytes "dev-<name>-secret" for a shared secret or token, written as the
// sender writes its secrets (a Standard Webhooks "whsec_" secret); for a
// public-key sender, the public key of a private key derived from those
// bytes (webhooktest.DevSigningSecret gives the private key). It is
// deterministic, so local tools can sign with it; a deployed function must
// refuse it (IsDevSecret).
func DevSecret(name string) string {
	seed := devSeed(name)
	p, _ := Lookup(name)
	switch {
	case p.Family == FamilyPublicKey && p.Algorithm == Ed25519:
		pub := ed25519.NewKeyFromSeed(devKeySeed(name)).Public().(ed25519.PublicKey)
		return hex.EncodeToString(pub)
	case p.Family == FamilyPublicKey && p.Algorithm == ECDSAP256:
		key, err := devECDSAKey(name)
		if err != nil {
			return seed
		}
		der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return seed
		}
		return base64.StdEncoding.EncodeToString(der)
	case p.SecretFormat == SecretWhsec:
		return StandardSecret([]byte(seed))
	case p.Family == FamilyItemHMAC:
		return hex.EncodeToString([]byte(seed))
	}
	return seed
}

// devSeed is the text every development secret is made from.
func devSeed(name string) string { return "dev-" + name + "-secret" }

// devKeySeed is the 32-byte seed of a development private key.
func devKeySeed(name string) []byte {
	sum := sha256.Sum256([]byte(devSeed(name)))
	return sum[:]
}

// devECDSAKey returns the development ECDSA P-256 private key of the sender
// called name, whose scalar is the SHA-256 of "dev-<name>-secret": only its
// public half is used here, to recognise it.
func devECDSAKey(name string) (*ecdsa.PrivateKey, error) {
	return ecdsa.ParseRawPrivateKey(elliptic.P256(), devKeySeed(name))
}

// IsDevSecret reports whether secret, configured for preset p, is the
// development secret of any sender (DevSecret, or its seed text), and
// whose. A Standard Webhooks secret is compared by the key it decodes to,
// since prefix and padding are optional.
func IsDevSecret(p Preset, secret string) (string, bool) {
	for _, name := range Names() {
		if secret == DevSecret(name) || secret == devSeed(name) {
			return name, true
		}
		if key, err := hex.DecodeString(secret); err == nil && p.Family == FamilyItemHMAC && string(key) == devSeed(name) {
			return name, true
		}
		if p.SecretFormat == SecretWhsec {
			if key, err := DecodeStandardSecret(secret); err == nil && string(key) == devSeed(name) {
				return name, true
			}
		}
	}
	return "", false
}
