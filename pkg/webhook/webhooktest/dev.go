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
// public half webhook.DevSecret is (Ed25519: hex seed; ECDSA: base64 PKCS #8),
// both derived from the SHA-256 of "dev-<name>-secret". Pass it to Sign.
func DevSigningSecret(name string) string {
	p, _ := webhook.Lookup(name)
	if p.Family != webhook.FamilyPublicKey {
		return webhook.DevSecret(name)
	}
	seed := sha256.Sum256([]byte("dev-" + name + "-secret"))
	if p.Algorithm == webhook.Ed25519 {
		return hex.EncodeToString(seed[:])
	}
	key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seed[:])
	if err != nil {
		panic("webhooktest: development key of " + name + ": " + err.Error())
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic("webhooktest: development key of " + name + ": " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(der)
}
