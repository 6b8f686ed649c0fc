package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
)

// Fingerprint identifies a payload, as a SHA-256: the same key with a different fingerprint is a
// mismatch, never a replay. The zero Fingerprint is a valid value meaning "no payload".
type Fingerprint [sha256.Size]byte

// FingerprintOf returns the SHA-256 of the raw payload bytes.
func FingerprintOf(payload []byte) Fingerprint { return sha256.Sum256(payload) }

// FingerprintJSON returns the SHA-256 of the canonical form of a JSON payload: object keys
// sorted, insignificant whitespace removed, numbers kept as written. With fields, only those
// top-level members count (a missing member counts as absent), so callers can exclude
// volatile parts such as timestamps. Input that is not one JSON value is an error.
func FingerprintJSON(payload []byte, fields ...string) (Fingerprint, error) {
	if fp, ok := fingerprintCanonical(payload, fields); ok {
		return fp, nil
	}
	return fingerprintDecoded(payload, fields)
}

// fingerprintDecoded is FingerprintJSON by way of the decoded value: the definition of the
// canonical form, which fingerprintCanonical writes without decoding, and the errors.
func fingerprintDecoded(payload []byte, fields []string) (Fingerprint, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Fingerprint{}, fmt.Errorf("idem: fingerprint: %w", err)
	}
	if dec.More() {
		return Fingerprint{}, fmt.Errorf("idem: fingerprint: trailing data after the JSON value")
	}
	if len(fields) > 0 {
		obj, ok := v.(map[string]any)
		if !ok {
			return Fingerprint{}, fmt.Errorf("idem: fingerprint: fields selected but the payload is not a JSON object")
		}
		selected := make(map[string]any, len(fields))
		for _, f := range fields {
			if fv, ok := obj[f]; ok {
				selected[f] = fv
			}
		}
		v = selected
	}
	// encoding/json writes map keys sorted and json.Number verbatim: a canonical form.
	canonical, err := json.Marshal(v)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("idem: fingerprint: %w", err)
	}
	return sha256.Sum256(canonical), nil
}
