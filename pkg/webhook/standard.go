package webhook

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// StandardSecretPrefix precedes the base64 key in a Standard Webhooks
// signing secret ("whsec_<base64>").
const StandardSecretPrefix = "whsec_"

// DecodeStandardSecret returns the HMAC key a Standard Webhooks secret
// encodes: the base64 after the optional "whsec_" prefix, padded or not, as
// the reference libraries accept it. It returns an error wrapping
// ErrInvalidSecret when that is not base64 or encodes nothing.
func DecodeStandardSecret(secret string) ([]byte, error) {
	encoded := strings.TrimPrefix(secret, StandardSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(encoded)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: a Standard Webhooks secret is %s<base64>: %v", ErrInvalidSecret, StandardSecretPrefix, err)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: a Standard Webhooks secret encodes an empty key", ErrInvalidSecret)
	}
	return key, nil
}

// StandardSecret formats key as a Standard Webhooks signing secret,
// "whsec_<base64>".
func StandardSecret(key []byte) string {
	return StandardSecretPrefix + base64.StdEncoding.EncodeToString(key)
}
