package handler

import (
	"context"
	"encoding/json"
	"fmt"

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
	doc, err := json.Marshal(struct {
		Provider string          `json:"provider"`
		ID       string          `json:"id"`
		Payload  json.RawMessage `json:"payload"`
	}{e.Provider, e.ID, e.Payload})
	if err != nil {
		return idem.Fingerprint{}, fmt.Errorf("consumer: %s event %s: the referenced payload is not JSON: %w", e.Provider, e.ID, err)
	}
	return idem.FingerprintJSON(doc, "provider", "id", "payload")
}
