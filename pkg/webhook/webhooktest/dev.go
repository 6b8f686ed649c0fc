package webhooktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"

	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/pkg/webhook"
)

// DevSigningSecret returns what the sender called provider signs with when
// a verifier runs with its development secret (webhook.DevSecret): the same
// shared secret or token, or for a public-key sender the private key whose
// public half webhook.DevSecret is, KeyPair(provider, "dev-<provider>-secret").
// Pass it to Sign.
func DevSigningSecret(provider string) string {
	p, _ := preset.Lookup(provider)
	if p.Family != preset.FamilyPublicKey {
		return webhook.DevSecret(provider)
	}
	private, _ := KeyPair(provider, "dev-"+provider+"-secret")
	return private
}

// KeyPair derives a key pair of the public-key sender called provider
// (Discord: Ed25519, SendGrid: ECDSA P-256) from seed, whose SHA-256 is the
// Ed25519 seed or the ECDSA scalar: the private key as Sign takes it
// (Ed25519: hex seed; ECDSA: base64 PKCS #8) and the public key as
// webhook.New takes it (Ed25519: hex; ECDSA: base64 DER SubjectPublicKeyInfo).
// Both are empty for a sender that signs with a shared secret.
func KeyPair(provider, seed string) (private, public string) {
	p, _ := preset.Lookup(provider)
	if p.Family != preset.FamilyPublicKey {
		return "", ""
	}
	sum := sha256.Sum256([]byte(seed))
	switch p.Algorithm {
	case preset.Ed25519:
		private = hex.EncodeToString(sum[:])
	case preset.ECDSAP256:
		key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), sum[:])
		if err != nil {
			panic("webhooktest: key from seed: " + err.Error())
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			panic("webhooktest: key from seed: " + err.Error())
		}
		private = base64.StdEncoding.EncodeToString(der)
	}
	public, err := publicKey(p.Algorithm, private)
	if err != nil {
		panic("webhooktest: key from seed: " + err.Error())
	}
	return private, public
}
