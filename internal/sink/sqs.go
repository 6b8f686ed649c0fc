package sink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of *sqs.Client the SQS sink uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

const (
	// DefaultSQSMaxMessageBytes is the largest message the SQS sink sends
	// unless told otherwise: 256 KiB, the MaximumMessageSize of queues created
	// before SQS raised its ceiling, and still the value many queues carry.
	DefaultSQSMaxMessageBytes = 256 * 1024
	// SQSMaxMessageBytesLimit is the largest message SQS accepts on any queue
	// (1 MiB), the upper bound for WithMaxMessageBytes.
	SQSMaxMessageBytesLimit = 1024 * 1024
	// sqsTokenMaxLen bounds MessageDeduplicationId and MessageGroupId.
	sqsTokenMaxLen = 128
)

// SQS sends each event as one message to a queue. The message body is the
// JSON envelope
//
//	{"provider":...,"id":...,"type":...,"object_id":...,"received_at":...,"payload":{...}}
//
// with the provider's payload embedded as JSON, and the message carries the
// String attributes "provider" and "type" (the latter only when the event has
// a type, since SQS rejects empty attribute values) for subscription filters
// and consumers that route before parsing.
//
// On a FIFO queue (URL ending in ".fifo") each message also gets a
// MessageDeduplicationId derived from provider and event id, so a send retried
// within SQS's five-minute window is delivered once, and a MessageGroupId of
// provider and object id, so the events of one object arrive in order while
// different objects are consumed in parallel.
type SQS struct {
	claimCheck
	client   SQSAPI
	queueURL string
	fifo     bool
	maxBytes int
}

// SQSOption configures an SQS sink.
type SQSOption func(*SQS)

// WithMaxMessageBytes sets the largest message, body and attributes counted
// as SQS counts them, the sink will send; larger events fail with ErrTooLarge
// before any request. Set it to the queue's MaximumMessageSize. Default
// DefaultSQSMaxMessageBytes; values outside 1..SQSMaxMessageBytesLimit are
// clamped into that range.
func WithMaxMessageBytes(n int) SQSOption {
	return func(s *SQS) {
		s.maxBytes = min(max(n, 1), SQSMaxMessageBytesLimit)
	}
}

// WithPayloadStore makes the SQS sink keep the payload of an event whose message would exceed
// the size limit in store, and send a message whose envelope carries a PayloadRef instead
// (see Envelope). Without it such an event fails with ErrTooLarge and ErrNoPayloadStore.
func WithPayloadStore(store PayloadStore) SQSOption {
	return func(s *SQS) { s.payloads = store }
}

// NewSQS returns a sink that sends to the queue at queueURL through client.
func NewSQS(client SQSAPI, queueURL string, opts ...SQSOption) *SQS {
	s := &SQS{
		client:   client,
		queueURL: queueURL,
		fifo:     strings.HasSuffix(queueURL, ".fifo"),
		maxBytes: DefaultSQSMaxMessageBytes,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Send sends e as one message. An event whose message would exceed the size
// limit has its payload put in the PayloadStore first, and the message carries
// the reference; without a store it fails with an error wrapping ErrTooLarge
// and ErrNoPayloadStore, and no request is made. Any error from SQS or the
// store is returned wrapped.
func (s *SQS) Send(ctx context.Context, e Event) error {
	body, err := encodeEnvelope(e, nil)
	if err != nil {
		return err
	}

	attrs := map[string]types.MessageAttributeValue{
		"provider": {DataType: aws.String("String"), StringValue: aws.String(e.Provider)},
	}
	if e.Type != "" {
		attrs["type"] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(e.Type)}
	}

	if size := sqsMessageSize(body, attrs); size > s.maxBytes {
		ref, err := s.offload(ctx, e, size, s.maxBytes)
		if err != nil {
			return err
		}
		if body, err = encodeEnvelope(e, ref); err != nil {
			return err
		}
		// Only the metadata is left, bounded by the webhook function; still, never send more.
		if size := sqsMessageSize(body, attrs); size > s.maxBytes {
			return fmt.Errorf("%w: sqs message for %s event %s is %d bytes without its payload, limit %d", ErrTooLarge, e.Provider, e.ID, size, s.maxBytes)
		}
	}

	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(s.queueURL),
		MessageBody:       aws.String(string(body)),
		MessageAttributes: attrs,
	}
	if s.fifo {
		in.MessageDeduplicationId = aws.String(sqsToken(e.Provider + ":" + e.ID))
		// Events without an object id have no order we know of. Grouping them
		// all under the provider would serialise every such event behind the
		// slowest one; a group per event lets them flow in parallel.
		group := e.ObjectID
		if group == "" {
			group = e.ID
		}
		in.MessageGroupId = aws.String(sqsToken(e.Provider + ":" + group))
	}

	if err := live(ctx); err != nil {
		return fmt.Errorf("sink: sqs send %s event %s: not sent: %w", e.Provider, e.ID, err)
	}
	if _, err := s.client.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("sink: sqs send %s event %s: %w", e.Provider, e.ID, err)
	}
	return nil
}

// sqsMessageSize counts a message as SQS does against MaximumMessageSize:
// the body plus each attribute's name, data type and value.
func sqsMessageSize(body []byte, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for name, a := range attrs {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	return n
}

// sqsToken turns s into a valid MessageDeduplicationId or MessageGroupId: at
// most 128 characters of alphanumerics and punctuation (printable ASCII
// without space). A value that already fits is kept, so it stays readable;
// anything else becomes its hex SHA-256. The two cannot collide: the values
// passed here always contain ':', which a hex digest never does.
func sqsToken(s string) string {
	if len(s) <= sqsTokenMaxLen && isSQSTokenSafe(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func isSQSTokenSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return s != ""
}
