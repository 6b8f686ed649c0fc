package sink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// PayloadStore keeps the payloads of events too large for one message of the queue or the bus
// (a claim check, as the Amazon SQS Extended Client Library does): the sink puts the payload
// first, then sends a message that carries a PayloadRef in its place, and the consumer gets it
// back with Envelope.Resolve. S3Store keeps them in an S3 bucket, MemoryStore in the process
// (the local API and the tests).
type PayloadStore interface {
	// Bucket names where the payloads are kept; every PayloadRef carries it, and Resolve
	// refuses a reference to another bucket.
	Bucket() string
	// Put stores payload under key, replacing what the key held: a retried send writes the
	// same object again. It stores all of payload or, on error, nothing new.
	Put(ctx context.Context, key string, payload []byte) error
	// Get returns what key holds; more than maxBytes is an error, so a reference cannot make
	// the consumer read without bound.
	Get(ctx context.Context, key string, maxBytes int64) ([]byte, error)
}

// PayloadRef is the pointer an envelope carries, as its member "payload_ref", in place of a
// payload kept in a PayloadStore ("payload" is then null):
//
//	"payload_ref": {"bucket": "idem-payloads-123", "key": "github/<64 hex digits>.json",
//	                "bytes": 2097152, "sha256": "<64 hex digits>"}
//
// Key is PayloadKey(provider, id), Bytes the payload's length and SHA256 the hex SHA-256 of
// its bytes, which Resolve checks.
type PayloadRef struct {
	// Bucket is the PayloadStore's Bucket.
	Bucket string `json:"bucket"`
	// Key is the object's key, PayloadKey of the envelope's provider and id.
	Key string `json:"key"`
	// Bytes is the payload's length.
	Bytes int64 `json:"bytes"`
	// SHA256 is the hex SHA-256 of the payload.
	SHA256 string `json:"sha256"`
}

// EnvPayloadBucket names the S3 bucket of the claim check: read by FromEnv for the sqs and
// eventbridge sinks and by PayloadStoreFromEnv for the consumer. Unset, an event too large for
// one message fails with ErrTooLarge.
const EnvPayloadBucket = "WEBHOOK_PAYLOAD_BUCKET"

// Errors of the claim check, wrapped with detail.
var (
	// ErrNoPayloadStore is wrapped, beside ErrTooLarge, by a sink's error for an event too large
	// for one message when the sink has no PayloadStore, and by Resolve's for a reference
	// without one.
	ErrNoPayloadStore = errors.New("sink: no payload store (" + EnvPayloadBucket + " is unset)")
	// ErrPayloadUnavailable is wrapped by Resolve's error when the referenced payload cannot be
	// read, or is not the one the reference describes (another bucket, key, length or digest).
	ErrPayloadUnavailable = errors.New("sink: referenced payload unavailable")
)

// PayloadKey is the key under which an event's payload is kept: the provider, then the hex
// SHA-256 of provider and event id, as "<provider>/<digest>.json". It is deterministic, so a
// retried send overwrites the object it wrote before, and per provider a prefix, so a
// lifecycle rule can keep each provider's objects as long as its retention.
func PayloadKey(provider, id string) string {
	sum := sha256.Sum256([]byte(provider + ":" + id))
	return provider + "/" + hex.EncodeToString(sum[:]) + ".json"
}

// claimCheck is what the SQS and EventBridge sinks share: the store for payloads that do not
// fit in a message.
type claimCheck struct {
	payloads PayloadStore
}

// offload puts e's payload in the store and returns the reference the message carries
// instead. The object is written before the message is sent, so no message ever points at a
// payload that is not there.
func (c claimCheck) offload(ctx context.Context, e Event, size, limit int) (*PayloadRef, error) {
	if c.payloads == nil {
		return nil, fmt.Errorf("%w: %w: the %s event %s is %d bytes, over the message limit of %d; set %s",
			ErrTooLarge, ErrNoPayloadStore, e.Provider, e.ID, size, limit, EnvPayloadBucket)
	}
	key := PayloadKey(e.Provider, e.ID)
	if err := c.payloads.Put(ctx, key, e.Body); err != nil {
		return nil, fmt.Errorf("sink: store the payload of %s event %s: %w", e.Provider, e.ID, err)
	}
	sum := sha256.Sum256(e.Body)
	return &PayloadRef{Bucket: c.payloads.Bucket(), Key: key, Bytes: int64(len(e.Body)), SHA256: hex.EncodeToString(sum[:])}, nil
}

// Resolve replaces a PayloadRef by the payload it points at, read from store, so that the
// envelope is the one an inline message would have given; an envelope without a reference is
// left as it is. The reference must name store's bucket and the key of the envelope's provider
// and id, and the payload must have the length and digest it states; anything else is an
// error wrapping ErrPayloadUnavailable (or ErrNoPayloadStore for a nil store).
func (e *Envelope) Resolve(ctx context.Context, store PayloadStore) error {
	ref := e.PayloadRef
	if ref == nil {
		return nil
	}
	if store == nil {
		return fmt.Errorf("sink: resolve %s event %s: %w", e.Provider, e.ID, ErrNoPayloadStore)
	}
	if ref.Bucket != store.Bucket() || ref.Key != PayloadKey(e.Provider, e.ID) || ref.Bytes < 0 {
		return fmt.Errorf("%w: %s event %s points at %s/%s, want %s/%s", ErrPayloadUnavailable,
			e.Provider, e.ID, ref.Bucket, ref.Key, store.Bucket(), PayloadKey(e.Provider, e.ID))
	}
	b, err := store.Get(ctx, ref.Key, ref.Bytes)
	if err != nil {
		return fmt.Errorf("%w: %s event %s: %w", ErrPayloadUnavailable, e.Provider, e.ID, err)
	}
	// An event id forwarded again with another payload after its records expired overwrites
	// the object; the older message then finds a payload that is not its own.
	if sum := sha256.Sum256(b); int64(len(b)) != ref.Bytes || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return fmt.Errorf("%w: %s event %s: the object at %s holds %d bytes that are not the payload the message describes",
			ErrPayloadUnavailable, e.Provider, e.ID, ref.Key, len(b))
	}
	e.Payload, e.PayloadRef = b, nil
	return nil
}

// MemoryStore is a PayloadStore in the process's memory: what stands in for S3 under the local
// API and in tests. It is safe for concurrent use.
type MemoryStore struct {
	bucket  string
	mu      sync.Mutex
	objects map[string][]byte
}

// NewMemoryStore returns an empty store whose Bucket is bucket.
func NewMemoryStore(bucket string) *MemoryStore {
	return &MemoryStore{bucket: bucket, objects: map[string][]byte{}}
}

// Bucket returns the name given to NewMemoryStore.
func (m *MemoryStore) Bucket() string { return m.bucket }

// Put keeps a copy of payload under key.
func (m *MemoryStore) Put(_ context.Context, key string, payload []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = append([]byte(nil), payload...)
	return nil
}

// ErrNoSuchKey is wrapped by MemoryStore.Get's error for a key it does not hold.
var ErrNoSuchKey = errors.New("sink: no such key")

// Get returns a copy of what key holds.
func (m *MemoryStore) Get(_ context.Context, key string, maxBytes int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %s/%s", ErrNoSuchKey, m.bucket, key)
	case int64(len(b)) > maxBytes:
		return nil, fmt.Errorf("sink: %s/%s holds %d bytes, over %d", m.bucket, key, len(b), maxBytes)
	}
	return append([]byte(nil), b...), nil
}

// Keys returns the keys the store holds, sorted.
func (m *MemoryStore) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.objects))
}
