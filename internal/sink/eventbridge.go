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
type EventBridge struct {
	client EventBridgeAPI
	bus    string
}

// NewEventBridge returns a sink that puts events on bus (a name or an ARN)
// through client.
func NewEventBridge(client EventBridgeAPI, bus string) *EventBridge {
	return &EventBridge{client: client, bus: bus}
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

// Send puts e on the bus. A request error, or an entry EventBridge reports as
// failed, is returned wrapped (the latter as *EntryError).
func (b *EventBridge) Send(ctx context.Context, e Event) error {
	detail, err := encodeEnvelope(e)
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
