package sink

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// EventBridgeAPI is the part of *eventbridge.Client the EventBridge sink uses.
type EventBridgeAPI interface {
	PutEvents(ctx context.Context, params *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// SourcePrefix is prepended to the provider's name to form the EventBridge
// Source of each event ("webhook.stripe", "webhook.github", ...), so rules can
// match one provider with {"source": ["webhook.stripe"]} or all of them with
// {"source": [{"prefix": "webhook."}]}.
const SourcePrefix = "webhook."

// DefaultDetailType is the DetailType of events that carry no type.
const DefaultDetailType = "webhook"

// EventBridge puts each event on a bus as one entry: Source
// SourcePrefix+provider, DetailType the event type (DefaultDetailType when
// empty), Detail the same JSON envelope the SQS sink sends, and Time the
// event's ReceivedAt.
//
// An entry larger than EventBridgeMaxEntryBytes, counted as EventBridge counts
// it, has its payload kept in the PayloadStore (WithEventBridgePayloadStore)
// and its detail carries a PayloadRef instead.
type EventBridge struct {
	claimCheck
	client EventBridgeAPI
	bus    string
}

// EventBridgeMaxEntryBytes is the largest PutEvents entry EventBridge accepts: 256 KiB.
const EventBridgeMaxEntryBytes = 256 * 1024

// EventBridgeOption configures an EventBridge sink.
type EventBridgeOption func(*EventBridge)

// WithEventBridgePayloadStore makes the EventBridge sink keep the payload of an event whose
// entry would exceed EventBridgeMaxEntryBytes in store, as WithPayloadStore does for SQS.
// Without it such an event fails with ErrTooLarge and ErrNoPayloadStore.
func WithEventBridgePayloadStore(store PayloadStore) EventBridgeOption {
	return func(b *EventBridge) { b.payloads = store }
}

// NewEventBridge returns a sink that puts events on bus (a name or an ARN)
// through client.
func NewEventBridge(client EventBridgeAPI, bus string, opts ...EventBridgeOption) *EventBridge {
	b := &EventBridge{client: client, bus: bus}
	for _, o := range opts {
		o(b)
	}
	return b
}

// eventBridgeEntrySize counts an entry as EventBridge does against its limit: 14 bytes for
// Time, and the UTF-8 bytes of Source, DetailType and Detail.
func eventBridgeEntrySize(e types.PutEventsRequestEntry) int {
	n := len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
	if e.Time != nil {
		n += 14
	}
	return n
}

// EntryError is a PutEvents entry that EventBridge refused. PutEvents answers
// such failures with HTTP 200 and a FailedEntryCount, so without this check a
// dropped event would look delivered.
type EntryError struct {
	// Code is EventBridge's ErrorCode, e.g. "InternalFailure" or
	// "ThrottlingException".
	Code string
	// Message is EventBridge's ErrorMessage.
	Message string
}

// Error returns the code and message.
func (e *EntryError) Error() string {
	return "eventbridge rejected entry: " + e.Code + ": " + e.Message
}

// Send puts e on the bus, its payload in the PayloadStore first when the
// entry would be too large (without a store: an error wrapping ErrTooLarge and
// ErrNoPayloadStore, and no request). A request error, or an entry EventBridge
// reports as failed, is returned wrapped (the latter as *EntryError).
func (b *EventBridge) Send(ctx context.Context, e Event) error {
	detail, err := encodeEnvelope(e, nil)
	if err != nil {
		return err
	}
	detailType := e.Type
	if detailType == "" {
		detailType = DefaultDetailType
	}
	entry := types.PutEventsRequestEntry{
		EventBusName: aws.String(b.bus),
		Source:       aws.String(SourcePrefix + e.Provider),
		DetailType:   aws.String(detailType),
		Detail:       aws.String(string(detail)),
	}
	if !e.ReceivedAt.IsZero() {
		entry.Time = aws.Time(e.ReceivedAt)
	}
	if size := eventBridgeEntrySize(entry); size > EventBridgeMaxEntryBytes {
		ref, err := b.offload(ctx, e, size, EventBridgeMaxEntryBytes)
		if err != nil {
			return err
		}
		if detail, err = encodeEnvelope(e, ref); err != nil {
			return err
		}
		entry.Detail = aws.String(string(detail))
		if size := eventBridgeEntrySize(entry); size > EventBridgeMaxEntryBytes {
			return fmt.Errorf("%w: eventbridge entry for %s event %s is %d bytes without its payload, limit %d", ErrTooLarge, e.Provider, e.ID, size, EventBridgeMaxEntryBytes)
		}
	}

	if err := live(ctx); err != nil {
		return fmt.Errorf("sink: eventbridge put %s event %s: not sent: %w", e.Provider, e.ID, err)
	}
	out, err := b.client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry}})
	if err != nil {
		return fmt.Errorf("sink: eventbridge put %s event %s: %w", e.Provider, e.ID, err)
	}
	if out.FailedEntryCount > 0 {
		ee := &EntryError{Code: "Unknown", Message: "no error detail in response"}
		for _, r := range out.Entries {
			if r.ErrorCode != nil || r.ErrorMessage != nil {
				ee = &EntryError{Code: aws.ToString(r.ErrorCode), Message: aws.ToString(r.ErrorMessage)}
				break
			}
		}
		return fmt.Errorf("sink: eventbridge put %s event %s: %w", e.Provider, e.ID, ee)
	}
	return nil
}
