// Package sink delivers a verified, first-seen webhook event to where the
// application consumes it: a JSON log line, an SQS queue or an EventBridge bus.
//
// A Sink is called after the idempotency claim and before the result is
// completed, so an error from Send means the caller answers 500, releases the
// claim and lets the provider retry. Sinks therefore never drop or truncate an
// event silently: anything they cannot deliver whole is an error.
package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Event is a webhook event whose signature has been verified and whose
// dedupe key was claimed for the first time.
type Event struct {
	// Provider is the sender's name, e.g. "stripe" or "github".
	Provider string
	// ID is the dedupe key, always derived from signed bytes: the provider's
	// signed event id (Stripe, Slack, Standard Webhooks), or "sha256:" and
	// the hex SHA-256 of the body for providers that sign the body only
	// (GitHub, Shopify). FIFO queues deduplicate on it.
	ID string
	// DeliveryID is the provider's own delivery id when the signature does
	// not cover it (GitHub's x-github-delivery, Shopify's
	// x-shopify-webhook-id); empty when ID is the provider's id.
	DeliveryID string
	// Type is the provider's event type, e.g. "payment_intent.succeeded"; may be empty.
	Type string
	// ObjectID identifies the object the event is about (a payment intent, a
	// repository, an order); may be empty. FIFO queues order events per object.
	ObjectID string
	// Unsigned names the fields ("id", "delivery_id", "type", "object_id",
	// "payload") whose values came from input the signature does not cover:
	// whoever captured a delivery could have set them. Every other field of
	// the event was signed.
	Unsigned []string
	// ReceivedAt is when the request reached the function.
	ReceivedAt time.Time
	// Body is the raw verified request body; it must be JSON.
	Body []byte
}

// Signed names the members of the event's envelope whose values come from
// bytes the provider's signature covers: "id", "delivery_id" (when set),
// "type", "object_id" and "payload", less those Unsigned names (a GitLab
// token binds none of them; Mailgun signs its token, the id, and nothing of
// the event). Provider and received_at are the receiver's own and in neither
// list.
func (e Event) Signed() []string {
	var signed []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"id", true}, {"delivery_id", e.DeliveryID != ""}, {"type", true}, {"object_id", true}, {"payload", true}} {
		if f.set && !slices.Contains(e.Unsigned, f.name) {
			signed = append(signed, f.name)
		}
	}
	return signed
}

// Sink receives verified, first-seen events.
type Sink interface {
	// Send delivers e, or returns an error wrapped with context. It must not
	// report success for an event it did not deliver whole, and sends nothing
	// once ctx is done or past its deadline (checked immediately before the
	// send).
	Send(ctx context.Context, e Event) error
}

// live returns why the work that ctx belongs to must not send any more, or nil: ctx is done, or
// its deadline has passed by the clock even if its timer has not fired yet (a process resumed
// after a pause runs its goroutines before its timers). Every sink calls it immediately before
// its side effect: past the deadline the idempotency claim may be another owner's.
func live(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// ErrTooLarge is returned (wrapped) when an event does not fit in one message
// of the destination. Events are never truncated.
var ErrTooLarge = errors.New("sink: event too large for destination")

// Envelope is the document SQS messages and EventBridge details carry: the
// event's metadata beside the provider's payload, embedded as JSON. A consumer
// decodes a message body or an entry's detail into it. Its Signed and
// Unsigned members say which of the others a consumer can trust as the
// provider's (see Event.Signed and Event.Unsigned).
//
// A payload too large for one message is kept in a PayloadStore and the envelope carries
// PayloadRef instead, with Payload null; Resolve puts the payload back.
type Envelope struct {
	Metadata
	// Payload is the provider's verified payload; null when PayloadRef is set.
	Payload json.RawMessage `json:"payload"`
	// PayloadRef points at the payload when it is kept in a PayloadStore; absent otherwise.
	PayloadRef *PayloadRef `json:"payload_ref,omitempty"`
}

// Metadata is the part of an event every encoding of it carries, in this order,
// before the provider's payload: the envelope's, and the log sink's line.
type Metadata struct {
	// Provider is the sender's name, e.g. "stripe".
	Provider string `json:"provider"`
	// ID is the event's dedupe key (Event.ID).
	ID string `json:"id"`
	// DeliveryID is the provider's delivery id when the signature does not cover it.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Type is the provider's event type; may be empty.
	Type string `json:"type"`
	// ObjectID identifies the object the event is about; may be empty.
	ObjectID string `json:"object_id"`
	// ReceivedAt is when the webhook function received the event, in UTC.
	ReceivedAt time.Time `json:"received_at,omitzero"`
	// Signed and Unsigned name the members whose values the provider's signature
	// covers, and those it does not (Event.Signed, Event.Unsigned).
	Signed   []string `json:"signed"`
	Unsigned []string `json:"unsigned,omitempty"`
}

func metaOf(e Event) Metadata {
	return Metadata{
		Provider:   e.Provider,
		ID:         e.ID,
		DeliveryID: e.DeliveryID,
		Type:       e.Type,
		ObjectID:   e.ObjectID,
		ReceivedAt: e.ReceivedAt.UTC(),
		Signed:     e.Signed(),
		Unsigned:   e.Unsigned,
	}
}

// encodeEnvelope encodes e's envelope: with its payload inline, or with ref in its place.
func encodeEnvelope(e Event, ref *PayloadRef) ([]byte, error) {
	env := Envelope{Metadata: metaOf(e), PayloadRef: ref}
	if ref == nil {
		env.Payload = rawJSON(e.Body)
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("sink: encode %s event %s: %w", e.Provider, e.ID, err)
	}
	return b, nil
}

// rawJSON keeps an empty body from producing an invalid document: it becomes
// null rather than nothing.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// Environment variables read by FromEnv.
const (
	// EnvSink selects the sink: "log" (default), "sqs" or "eventbridge".
	EnvSink = "WEBHOOK_SINK"
	// EnvQueueURL is the SQS queue URL, required when EnvSink is "sqs". A URL
	// ending in ".fifo" makes the sink set deduplication and group ids.
	EnvQueueURL = "WEBHOOK_QUEUE_URL"
	// EnvSQSMaxMessageBytes optionally overrides DefaultSQSMaxMessageBytes, up
	// to SQSMaxMessageBytesLimit, for queues whose MaximumMessageSize is larger.
	EnvSQSMaxMessageBytes = "WEBHOOK_SQS_MAX_MESSAGE_BYTES"
	// EnvEventBus is the EventBridge bus name or ARN, required when EnvSink is
	// "eventbridge".
	EnvEventBus = "WEBHOOK_EVENT_BUS"
)

// FromEnv builds the sink named by WEBHOOK_SINK, reading its settings through
// getenv:
//
//   - "log" or unset: NewLog(logOut); a nil logOut means os.Stdout.
//   - "sqs": NewSQS on WEBHOOK_QUEUE_URL (required), with the size limit
//     from WEBHOOK_SQS_MAX_MESSAGE_BYTES when set.
//   - "eventbridge": NewEventBridge on WEBHOOK_EVENT_BUS (required).
//
// The sqs and eventbridge sinks keep payloads too large for one message in
// payloads, or, when payloads is nil, in an S3Store on WEBHOOK_PAYLOAD_BUCKET
// when that is set; with neither such events fail with ErrTooLarge.
//
// A missing or malformed setting, or an unknown sink, is an error naming the
// variable. The AWS clients are built once, here, from config.LoadDefaultConfig,
// which reads the process environment itself (not getenv): region, credentials,
// and endpoint overrides such as AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_EVENTBRIDGE and AWS_ENDPOINT_URL_S3. Loading the configuration
// makes no network call; credentials are fetched on first use.
func FromEnv(ctx context.Context, getenv func(string) string, logOut io.Writer, payloads PayloadStore) (Sink, error) {
	switch kind := strings.ToLower(strings.TrimSpace(getenv(EnvSink))); kind {
	case "", "log":
		if logOut == nil {
			logOut = os.Stdout
		}
		return NewLog(logOut), nil
	case "sqs":
		return sqsFromEnv(ctx, getenv, payloads)
	case "eventbridge":
		return eventBridgeFromEnv(ctx, getenv, payloads)
	default:
		return nil, fmt.Errorf("sink: %s=%q is not one of log, sqs, eventbridge", EnvSink, kind)
	}
}

// sqsFromEnv builds FromEnv's "sqs" sink; payloads, when nil, is the S3Store on
// WEBHOOK_PAYLOAD_BUCKET if that is set.
func sqsFromEnv(ctx context.Context, getenv func(string) string, payloads PayloadStore) (Sink, error) {
	queueURL := strings.TrimSpace(getenv(EnvQueueURL))
	if queueURL == "" {
		return nil, fmt.Errorf("sink: %s is required when %s=sqs", EnvQueueURL, EnvSink)
	}
	if u, err := url.Parse(queueURL); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("sink: %s=%q is not an SQS queue URL", EnvQueueURL, queueURL)
	}
	var opts []SQSOption
	if v := strings.TrimSpace(getenv(EnvSQSMaxMessageBytes)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > SQSMaxMessageBytesLimit {
			return nil, fmt.Errorf("sink: %s=%q must be an integer from 1 to %d", EnvSQSMaxMessageBytes, v, SQSMaxMessageBytesLimit)
		}
		opts = append(opts, WithMaxMessageBytes(n))
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("sink: load AWS config for %s=sqs: %w", EnvSink, err)
	}
	if payloads == nil {
		payloads = s3StoreFromEnv(cfg, getenv)
	}
	if payloads != nil {
		opts = append(opts, WithPayloadStore(payloads))
	}
	return NewSQS(sqs.NewFromConfig(cfg), queueURL, opts...), nil
}

// eventBridgeFromEnv builds FromEnv's "eventbridge" sink; payloads, when nil, is the S3Store on
// WEBHOOK_PAYLOAD_BUCKET if that is set.
func eventBridgeFromEnv(ctx context.Context, getenv func(string) string, payloads PayloadStore) (Sink, error) {
	bus := strings.TrimSpace(getenv(EnvEventBus))
	if bus == "" {
		return nil, fmt.Errorf("sink: %s is required when %s=eventbridge", EnvEventBus, EnvSink)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("sink: load AWS config for %s=eventbridge: %w", EnvSink, err)
	}
	if payloads == nil {
		payloads = s3StoreFromEnv(cfg, getenv)
	}
	var opts []EventBridgeOption
	if payloads != nil {
		opts = append(opts, WithEventBridgePayloadStore(payloads))
	}
	return NewEventBridge(eventbridge.NewFromConfig(cfg), bus, opts...), nil
}

// PayloadStoreFromEnv returns the S3Store on WEBHOOK_PAYLOAD_BUCKET, for a consumer that
// resolves the references the sinks send, or nil when the variable is unset. The S3 client
// honours AWS_ENDPOINT_URL_S3.
func PayloadStoreFromEnv(ctx context.Context, getenv func(string) string) (PayloadStore, error) {
	if strings.TrimSpace(getenv(EnvPayloadBucket)) == "" {
		return nil, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("sink: load AWS config for %s: %w", EnvPayloadBucket, err)
	}
	return s3StoreFromEnv(cfg, getenv), nil
}

// s3StoreFromEnv returns the S3Store on WEBHOOK_PAYLOAD_BUCKET, or nil when it is unset.
func s3StoreFromEnv(cfg aws.Config, getenv func(string) string) PayloadStore {
	bucket := strings.TrimSpace(getenv(EnvPayloadBucket))
	if bucket == "" {
		return nil
	}
	// The store checks each payload's SHA-256 itself; the SDK's note that a response carries no
	// checksum it knows would be a non-JSON line in the function's log per object read.
	return NewS3Store(s3.NewFromConfig(cfg, func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true }), bucket)
}

// NeedsPayloadStore reports whether s is a sink with a message size limit (sqs, eventbridge)
// but no PayloadStore: events over its limit will fail with ErrTooLarge. A function logs it at
// init, so that the cause is known before the first large event.
func NeedsPayloadStore(s Sink) (limit int, needs bool) {
	switch s := s.(type) {
	case *SQS:
		return s.maxBytes, s.payloads == nil
	case *EventBridge:
		return EventBridgeMaxEntryBytes, s.payloads == nil
	}
	return 0, false
}
