package webhooktest

// PublicKey is the public key of a private key Sign takes, for tests.
var PublicKey = publicKey
