package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/idemlambda/idem/internal/jsonstr"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/idem"
)

// resolvePayload reads back the payload e points at (sink.Envelope.Resolve) and returns the
// fingerprint the record would have had with the payload inline: that of provider, id and
// payload, canonical JSON either way. So an event forwarded once by reference and once inline
// (its envelope's size crossing the limit) is one event, not an event id reused.
func resolvePayload(ctx context.Context, e *Event, store sink.PayloadStore) (idem.Fingerprint, error) {
	if err := e.Resolve(ctx, store); err != nil {
		return idem.Fingerprint{}, fmt.Errorf("consumer: %w", err)
	}
	payload := e.Payload
	if payload == nil {
		payload = json.RawMessage("null") // as an inline envelope carries an empty body
	}
	if !json.Valid(payload) {
		return idem.Fingerprint{}, fmt.Errorf("consumer: %s event %s: the referenced payload is not JSON", e.Provider, e.ID)
	}
	return fingerprintOf(e.Provider, e.ID, payload)
}

// docPool holds the buffers fingerprintOf writes its documents in.
var docPool = sync.Pool{New: func() any { return new([]byte) }}

// fingerprintOf returns the fingerprint of an envelope's provider, id and payload (one JSON
// value, or nil for an envelope without one): idem.FingerprintJSON of the members "provider",
// "id" and "payload", the same for every envelope whose members of those names decode to
// these values, since the canonical form is the decoded values'.
func fingerprintOf(provider, id string, payload json.RawMessage) (idem.Fingerprint, error) {
	buf := docPool.Get().(*[]byte)
	defer docPool.Put(buf)
	doc := append((*buf)[:0], `{"provider":`...)
	doc = jsonstr.Append(doc, provider)
	doc = append(doc, `,"id":`...)
	doc = jsonstr.Append(doc, id)
	if payload != nil {
		doc = append(doc, `,"payload":`...)
		doc = append(doc, payload...)
	}
	doc = append(doc, '}')
	*buf = doc
	fp, err := idem.FingerprintJSON(doc, "provider", "id", "payload")
	if err != nil {
		return idem.Fingerprint{}, fmt.Errorf("consumer: fingerprint %s event %s: %w", provider, id, err)
	}
	return fp, nil
}
