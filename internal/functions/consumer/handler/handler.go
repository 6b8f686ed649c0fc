// Package handler is the consumer function: it receives the events the webhook functions
// forward (the sqs sink's messages on the FIFO queue, or the eventbridge sink's entries as a
// rule target) and runs each through Process exactly once, however often it is delivered.
//
// The Lambda entry point (functions/consumer) builds one Handler at init and passes its Handle
// method to lambda.Start; a local API server and the tests call the same methods in-process.
//
// Each event is keyed on its provider and the provider's event id (the envelope's provider and
// id), so a message SQS delivers again, and an event the webhook function forwarded twice, run
// Process once; the payload's fingerprint covers provider, id and payload, not the receipt
// time. A batch goes through idemsqs: its claims in one Redis round trip, its completions in one
// more. Records of one message group (one provider object) keep their order; after a failure
// the group's later records wait for the next delivery.
//
// One JSON log line per record (obs.LogRequest), with outcome
//
//	executed     Process ran and succeeded
//	replayed     the event was processed before (or earlier in the same batch)
//	in_progress  another environment is processing it; SQS delivers it again later
//	error        Process failed, the record is not an event, Redis is unavailable, the event id
//	             came with another payload, an earlier record of its group failed, or the payload
//	             the message points at cannot be read (reason processing_failed, invalid_event,
//	             store_unavailable, event_id_reused, skipped, payload_unavailable);
//	             the record is delivered again, and after the queue's maxReceiveCount it goes to
//	             the dead-letter queue
//
// and id the provider's event id.
//
// A message whose payload the sink kept in the payload bucket (its envelope's payload_ref, see
// sink.PayloadRef) has the payload read back (WEBHOOK_PAYLOAD_BUCKET, or WithPayloadStore) and
// checked before its claim, so Process receives the same Event, and the record the same
// fingerprint, as if the payload had come inline. A record whose Process ran but whose outcome could not be
// stored is logged as error (reason lock_lost or result_not_stored) but not delivered again.
// The lines carry status 0 (there is no HTTP response) and the batch's duration.
package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/redisguard"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemsqs"
)

// Scope is the idempotency key scope of the consumer's records.
const Scope = "consumer"

// Event is a forwarded webhook event: the envelope the sqs sink sends as the message body and
// the eventbridge sink as the entry's detail.
type Event = sink.Envelope

// ErrNotAnEvent is returned (wrapped) by ParseEvent for a body that is not a forwarded event.
var ErrNotAnEvent = errors.New("consumer: not a forwarded webhook event")

// ParseEvent decodes a forwarded event (sink.DecodeEnvelope), which must name its provider and
// event id. The event's Payload may share body's bytes: body must not change while it is in use.
func ParseEvent(body []byte) (Event, error) {
	e, _, err := parseEvent(body)
	return e, err
}

// parseEvent is ParseEvent, and reports whether body was in the sinks' form
// (sink.ReadEnvelope).
func parseEvent(body []byte) (Event, bool, error) {
	e, sinkForm, err := sink.ReadEnvelope(body)
	if err != nil {
		return Event{}, false, fmt.Errorf("%w: %w", ErrNotAnEvent, err)
	}
	if e.Provider == "" || e.ID == "" {
		return Event{}, false, fmt.Errorf("%w: no provider or id", ErrNotAnEvent)
	}
	return e, sinkForm, nil
}

// Process is the work done once per forwarded event. An error makes the record fail: it is
// delivered again. Its context ends before the event's claim can expire.
type Process func(ctx context.Context, e Event) error

// LogProcess returns the default Process: one JSON line per event ("event processed", with
// provider, id, type and object_id) on logger.
func LogProcess(logger *slog.Logger) Process {
	return func(ctx context.Context, e Event) error {
		logger.InfoContext(ctx, "event processed", "provider", e.Provider, "id", obs.Bound(e.ID, obs.MaxIDBytes),
			"type", e.Type, "object_id", e.ObjectID)
		return nil
	}
}

// Handler consumes forwarded events. Build it once per execution environment with New; its
// methods are safe for concurrent use.
type Handler struct {
	guard       *idem.Guard
	process     Process
	concurrency int
	logger      *slog.Logger
	conn        *redisconn.Conn // nil when the client came from WithRedis
	payloads    sink.PayloadStore
}

// New builds everything a batch needs, once: the settings (EnvConcurrency, LOG_LEVEL, and
// those of redisconn and idem), the Redis client and the guard. It never dials Redis (unless
// WithRedisOptions asks for a warm-up): a Redis that is down fails the records, which SQS
// delivers again. A missing or malformed setting is an error naming the variable.
func New(ctx context.Context, getenv func(string) string, opts ...Option) (*Handler, error) {
	o := options{logOut: os.Stdout}
	for _, opt := range opts {
		opt(&o)
	}
	s, err := readSettings(getenv)
	if err != nil {
		return nil, err
	}
	idemOpts, err := config.IdemOptions(getenv, DefaultResultTTL)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	h := &Handler{logger: obs.NewLogger(o.logOut, s.level, s.function), process: o.process, concurrency: s.concurrency, payloads: o.payloads}
	if h.payloads == nil {
		if h.payloads, err = sink.PayloadStoreFromEnv(ctx, getenv); err != nil {
			return nil, fmt.Errorf("consumer: %w", err)
		}
	}
	settings := redisconn.Settings{}
	if o.redis == nil {
		if settings, err = redisconn.SettingsFromEnv(getenv); err != nil {
			return nil, fmt.Errorf("consumer: %w", err)
		}
	}
	if h.guard, h.conn, err = redisguard.Open(ctx, redisguard.Config{
		Client:       o.redis,
		Settings:     settings,
		RedisOptions: o.redisOpts,
		GuardOptions: append(append(idemOpts, idem.WithObserver(obs.GuardObserver(h.logger))), o.guardOpts...),
	}); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if h.process == nil {
		h.process = LogProcess(h.logger)
	}
	return h, nil
}

// record is one record of a batch, decoded once: its key, fingerprint, work and log line all
// come from this.
type record struct {
	body  string
	event Event
	err   error // ErrNotAnEvent, wrapped: the record has no key
	fp    idem.Fingerprint
	fpErr error
}

// decode decodes a record's body, with its payload read back when the message points at it. The
// fingerprint covers what the provider sent (provider, id, payload), not the receipt time nor
// the unsigned metadata, which may differ when the webhook function forwards an event twice.
func (b *batch) decode(body string) record {
	r, raw := record{body: body}, []byte(body)
	var sinkForm bool
	if r.event, sinkForm, r.err = parseEvent(raw); r.err != nil {
		return r
	}
	switch {
	case r.event.PayloadRef != nil:
		r.fp, r.fpErr = resolvePayload(b.ctx, &r.event, b.payloads)
	case sinkForm:
		// The event's provider, id and payload are the body's members of those names: the
		// fingerprint of those alone is the body's, without a pass over the rest.
		r.fp, r.fpErr = fingerprintOf(r.event.Provider, r.event.ID, r.event.Payload)
	default:
		r.fp, r.fpErr = idem.FingerprintJSON(raw, "provider", "id", "payload")
	}
	return r
}

// batch is a batch's records, each decoded once, in the batch's order.
type batch struct {
	recs     []record
	byID     map[string]int  // index in recs by message id
	ctx      context.Context // the invocation's, for reading payloads back
	payloads sink.PayloadStore
}

func decodeBatch(ctx context.Context, msgs []events.SQSMessage, payloads sink.PayloadStore) *batch {
	b := &batch{recs: make([]record, len(msgs)), byID: make(map[string]int, len(msgs)), ctx: ctx, payloads: payloads}
	for i, msg := range msgs {
		b.recs[i] = b.decode(msg.Body)
		if _, ok := b.byID[msg.MessageId]; !ok {
			b.byID[msg.MessageId] = i
		}
	}
	return b
}

// of returns msg's decoding (a message id the batch repeats with another body is decoded anew).
func (b *batch) of(msg events.SQSMessage) record {
	if i, ok := b.byID[msg.MessageId]; ok && b.recs[i].body == msg.Body {
		return b.recs[i]
	}
	return b.decode(msg.Body)
}

// key is a record's key: the provider and its event id.
func (b *batch) key(msg events.SQSMessage) (string, error) {
	r := b.of(msg)
	if r.err != nil {
		return "", r.err
	}
	return r.event.Provider + ":" + r.event.ID, nil
}

// fingerprint is a record's fingerprint (see decode).
func (b *batch) fingerprint(msg events.SQSMessage) (idem.Fingerprint, error) {
	r := b.of(msg)
	return r.fp, r.fpErr
}

// Close releases what New built: the Redis client. A client given with WithRedis is left open.
func (h *Handler) Close() error {
	if err := h.conn.Close(); err != nil {
		return fmt.Errorf("consumer: close: %w", err)
	}
	return nil
}

// HandleSQS processes a batch of the sqs sink's messages and returns the records to deliver
// again (the event source mapping must set FunctionResponseTypes: [ReportBatchItemFailures]).
// It writes one log line per record. Its error is nil but for a handler it cannot build.
func (h *Handler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	start := time.Now()
	b := decodeBatch(ctx, ev.Records, h.payloads)
	// Built per batch: the key and fingerprint functions read this batch's decoded messages.
	sqsHandler, err := idemsqs.New(h.guard, func(ctx context.Context, msg events.SQSMessage) (struct{}, error) {
		r := b.of(msg)
		if r.err != nil {
			return struct{}{}, r.err
		}
		return struct{}{}, h.process(ctx, r.event)
	},
		idemsqs.WithScope(Scope),
		idemsqs.WithKey(b.key),
		idemsqs.WithFingerprint(b.fingerprint),
		idemsqs.WithConcurrency(h.concurrency))
	if err != nil {
		// Cannot happen (New built the guard, Scope is valid); an error retries the batch.
		return events.SQSEventResponse{}, fmt.Errorf("consumer: %w", err)
	}
	resp, recs := sqsHandler.Run(ctx, ev)
	h.logRecords(ctx, b, recs, time.Since(start))
	return resp, nil
}

// HandleEventBridge processes one entry of the eventbridge sink, delivered by a rule whose
// target is this function (an asynchronous invocation), and writes its log line. It returns
// an error when the event must be delivered again (Process failed, another environment is
// processing it, Redis is unavailable), so that Lambda's retries of asynchronous invocations,
// and then the rule's dead-letter queue, take over. The entry's id is not the key: the
// provider's event id in its detail is, as for SQS.
func (h *Handler) HandleEventBridge(ctx context.Context, ev events.EventBridgeEvent) error {
	msg := events.SQSMessage{MessageId: ev.ID, Body: string(ev.Detail), EventSource: "aws:events"}
	resp, err := h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}})
	if err == nil && len(resp.BatchItemFailures) > 0 {
		err = fmt.Errorf("consumer: event %s not processed; deliver it again", ev.ID)
	}
	return err
}

// Handle is the function passed to lambda.Start: an SQS event (with Records) goes to HandleSQS,
// anything else is read as an EventBridge event and goes to HandleEventBridge.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records    json.RawMessage `json:"Records"`
		DetailType *string         `json:"detail-type"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("consumer: the invocation is not a JSON object: %w", err)
	}
	switch {
	case probe.Records != nil:
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("consumer: not an SQS event: %w", err)
		}
		return h.HandleSQS(ctx, ev)
	case probe.DetailType != nil:
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("consumer: not an EventBridge event: %w", err)
		}
		return nil, h.HandleEventBridge(ctx, ev)
	}
	return nil, errors.New("consumer: the invocation is neither an SQS nor an EventBridge event")
}

// Reasons of error lines, stable across releases.
const (
	reasonProcessingFailed = "processing_failed"
	reasonInvalidEvent     = "invalid_event"
	reasonStoreUnavailable = "store_unavailable"
	reasonEventIDReused    = "event_id_reused"
	reasonSkipped          = "skipped"
	reasonLockLost         = "lock_lost"
	reasonResultNotStored  = "result_not_stored"
	reasonPayloadUnavail   = "payload_unavailable"
	// reasonResultNotReplayable: the record ran (here or before) but its result could not be
	// stored; a marker stands in for it and the record is not run again.
	reasonResultNotReplayable = "result_not_replayable"
)

// logRecords writes one line per record.
func (h *Handler) logRecords(ctx context.Context, b *batch, recs []idemsqs.Record[struct{}], d time.Duration) {
	for i, r := range recs {
		line := obs.Request{Duration: d, RoundTrips: r.RoundTrips, ID: r.MessageID, Err: r.Err}
		if rec := b.recs[i]; rec.err == nil {
			line.Provider, line.ID = rec.event.Provider, rec.event.ID
		}
		line.Outcome, line.Reason = outcomeOf(r)
		obs.LogRequest(ctx, h.logger, line)
	}
}

// outcomeOf maps a record's outcome to the log line's outcome and reason.
func outcomeOf(r idemsqs.Record[struct{}]) (string, string) {
	switch {
	case errors.Is(r.Err, sink.ErrPayloadUnavailable), errors.Is(r.Err, sink.ErrNoPayloadStore):
		return obs.OutcomeError, reasonPayloadUnavail
	case errors.Is(r.Err, idemsqs.ErrSkipped):
		return obs.OutcomeError, reasonSkipped
	case r.Kind == idem.Executed, r.Kind == idem.ExecutedUnguarded:
		return obs.OutcomeExecuted, ""
	case r.Kind == idem.Replayed:
		return obs.OutcomeReplayed, ""
	case r.Kind == idem.InProgress:
		return obs.OutcomeInProgress, ""
	case r.Kind == idem.LockLost:
		return obs.OutcomeError, reasonLockLost
	case r.Kind == idem.NotStored:
		return obs.OutcomeError, reasonResultNotStored
	case r.Kind == idem.NotReplayable:
		return obs.OutcomeError, reasonResultNotReplayable
	case r.Kind == idem.Mismatch:
		return obs.OutcomeError, reasonEventIDReused
	case r.Kind == idem.Unavailable:
		return obs.OutcomeError, reasonStoreUnavailable
	case r.Kind == idem.InvalidKey:
		return obs.OutcomeError, reasonInvalidEvent
	}
	return obs.OutcomeError, reasonProcessingFailed
}
