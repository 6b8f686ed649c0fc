package webhooktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"

	"github.com/idemlambda/idem/pkg/webhook"
)

// DevSigningSecret returns what the sender called name signs with when a
// function runs with its development secret (webhook.DevSecret): the same
// shared secret or token, or for a public-key sender the private key whose
// public half webhook.DevSecret is: KeyPair(algorithm, "dev-<name>-secret").
// Pass it to Sign.
func DevSigningSecret(name string) string {
	p, _ := webhook.Lookup(name)
	if p.Family != webhook.FamilyPublicKey {
		return webhook.DevSecret(name)
	}
	private, _ := KeyPair(p.Algorithm, "dev-"+name+"-secret")
	return private
}

// KeyPair derives a key pair of a public-key algorithm from seed (its
// SHA-256 is the Ed25519 seed or the ECDSA P-256 scalar): the private key as
// Sign takes it (Ed25519: hex seed; ECDSA: base64 PKCS #8) and the public key
// as a verifier is configured with it (Ed25519: hex; ECDSA: base64 DER
// SubjectPublicKeyInfo). Both are empty for another algorithm.
func KeyPair(a webhook.Algorithm, seed string) (private, public string) {
	sum := sha256.Sum256([]byte(seed))
	switch a {
	case webhook.Ed25519:
		private = hex.EncodeToString(sum[:])
	case webhook.ECDSAP256:
		key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), sum[:])
		if err != nil {
			panic("webhooktest: key from seed: " + err.Error())
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			panic("webhooktest: key from seed: " + err.Error())
		}
		private = base64.StdEncoding.EncodeToString(der)
	default:
		return "", ""
	}
	public, err := PublicKey(a, private)
	if err != nil {
		panic("webhooktest: key from seed: " + err.Error())
	}
	return private, public
}
