// Package idemsqs runs the records of an SQS batch exactly once each, under an idem.Guard, as a
// Lambda handler for events.SQSEvent that reports partial batch failures.
//
// Every record is keyed on its message id, or on what a key function reads from it (an event
// id in the body). The batch goes through idem.Guard.DoBatch: the claims of all its records in
// one pipelined round trip, their completions and releases in one more, so a batch of up to 500
// new records costs 2 round trips on one Redis node (on a cluster, one per node holding a key,
// the nodes asked in parallel), where claiming and completing each record on its own would cost
// 2 per record; a larger batch of a standard queue (up to 10,000 records) goes in parts of 500.
//
// The response lists in BatchItemFailures every record that failed or is in progress
// elsewhere, so that SQS delivers those again and deletes the others; a replay (a record whose
// work completed before) counts as a success. The event source mapping must set
// FunctionResponseTypes: [ReportBatchItemFailures], or Lambda ignores the list and retries the
// whole batch after any error.
//
// On a FIFO queue the records of one message group run one after another, in the batch's
// order, and after a failure in a group that group's later records are listed as failures
// without running, so the group keeps its order when SQS delivers them again. Records of
// different groups, and all records of a standard queue, run concurrently, at most
// WithConcurrency at a time: the handler's goroutine runs them one after another while they are
// quick, and starts the other workers once the batch's works have run for 100 µs, so that a
// batch of quick records costs no goroutine and a batch of slow ones reaches its concurrency at
// most 100 µs later.
//
// A message that appears twice in one batch runs once: the second takes the first's outcome.
package idemsqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/internal/unencodable"
)

// DefaultScope is the idempotency key scope of the records unless WithScope says otherwise.
const DefaultScope = "sqs"

// DefaultConcurrency is how many records' work may run at once unless WithConcurrency says
// otherwise: 10, the largest batch a FIFO queue delivers and the default batch size of an SQS
// event source.
const DefaultConcurrency = 10

// ErrSkipped is the error of a record of a FIFO message group that did not run because an
// earlier record of its group failed in the same batch.
var ErrSkipped = errors.New("idemsqs: not run: an earlier record of its message group failed")

// Option configures a Handler.
type Option func(*config)

type config struct {
	scope       string
	key         func(events.SQSMessage) (string, error)
	fingerprint func(events.SQSMessage) (idem.Fingerprint, error)
	fifo        *bool
	concurrency int
}

// WithScope sets the scope of the records' idempotency keys, so that two consumers sharing a
// Redis keep their keys apart. Default DefaultScope ("sqs").
func WithScope(scope string) Option { return func(c *config) { c.scope = scope } }

// WithKey makes key(msg) the idempotency key ID of a record, for example an event id read
// from the body, so that the same event sent twice as two messages still runs once. An error
// from key fails the record (it is listed in BatchItemFailures). Default: the message id,
// which SQS keeps across redeliveries of one message.
//
// The fingerprint stays the SHA-256 of the raw body unless WithFingerprint says otherwise: two
// messages with the same key whose bodies differ in any byte (a field order, a sent_at) are a
// Mismatch, and the second fails on every delivery until the queue's dead-letter queue takes
// it. With a key read from the body, pass WithFingerprint too, over the fields that mean "the
// same event".
func WithKey(key func(msg events.SQSMessage) (string, error)) Option {
	return func(c *config) { c.key = key }
}

// WithFingerprint sets what identifies a record's payload: the same key with another
// fingerprint is a mismatch (listed as a failure), never a replay. Default: the SHA-256 of the
// body. With WithKey reading an id from the body, return idem.FingerprintJSON of the fields that
// describe the event, leaving out those that differ between two sends of it.
func WithFingerprint(fp func(msg events.SQSMessage) (idem.Fingerprint, error)) Option {
	return func(c *config) { c.fingerprint = fp }
}

// WithFIFO says whether the queue is FIFO (records of a message group in order, a failure
// holding back the rest of its group). Default: detected per batch, FIFO when the first
// record's eventSourceARN ends in ".fifo".
func WithFIFO(fifo bool) Option { return func(c *config) { c.fifo = &fifo } }

// WithConcurrency bounds how many records' work runs at once (n < 1 means 1). Default
// DefaultConcurrency. Records of one FIFO message group never run at once whatever n is. The
// workers beyond the handler's own goroutine start only once a batch's works have run for
// 100 µs: quick records run one after another, which costs less than starting goroutines.
func WithConcurrency(n int) Option {
	return func(c *config) { c.concurrency = max(n, 1) }
}

// Handler runs the records of SQS batches through fn under a guard. Build it once per
// execution environment; it is safe for concurrent use.
type Handler[Out any] struct {
	guard *idem.Guard
	fn    func(context.Context, events.SQSMessage) (Out, error)
	cfg   config
}

// New returns a Handler that runs fn once per record key under g. fn's result is stored as
// JSON (encoding/json: exported fields only) and decoded for every replay; an error from fn
// releases the record's claim and lists the record in BatchItemFailures, so its redelivery
// runs fn again. A result that cannot be stored (one encoding/json refuses, or over 256 KiB
// encoded) is not an error of fn: fn ran, so the guard keeps a marker in its place, the record
// is NotReplayable and not listed, and a redelivery of it does not run fn again. fn's context
// ends before the record's claim can expire (see idem.Guard.Do).
//
// A nil guard or fn, or a scope idem.Key.Validate refuses, is an error here, at construction,
// never a panic at the first batch.
func New[Out any](g *idem.Guard, fn func(ctx context.Context, msg events.SQSMessage) (Out, error), opts ...Option) (*Handler[Out], error) {
	switch {
	case g == nil:
		return nil, errors.New("idemsqs: nil guard")
	case fn == nil:
		return nil, errors.New("idemsqs: nil function")
	}
	c := config{scope: DefaultScope, concurrency: DefaultConcurrency}
	for _, opt := range opts {
		opt(&c)
	}
	if err := (idem.Key{Scope: c.scope, ID: "x"}).Validate(); err != nil {
		return nil, fmt.Errorf("idemsqs: %w", err)
	}
	return &Handler[Out]{guard: g, fn: fn, cfg: c}, nil
}

// Record is what happened to one record of a batch.
type Record[Out any] struct {
	// MessageID is the record's SQS message id.
	MessageID string
	// Key is the record's idempotency key ID (the message id, or what WithKey returned).
	Key string
	// Kind is the guard's outcome: Executed (fn ran here and its result is stored), Replayed
	// (fn ran before; Result is its stored result), InProgress (another caller holds the key),
	// Failed (fn failed, or did not run: see Err), Mismatch, Unavailable, InvalidKey, and
	// LockLost, NotStored, NotReplayable or ExecutedUnguarded as idem.Guard.Do reports them
	// (a NotReplayable record ran, here or before, and is not delivered again).
	Kind idem.Kind
	// Duplicate is true for a record whose key an earlier record of the batch holds: it did
	// not run, and has the earlier record's outcome (Replayed when that one succeeded).
	Duplicate bool
	// Result is fn's result (Executed, LockLost, NotStored, ExecutedUnguarded, and
	// NotReplayable when fn ran in this batch) or the stored one, decoded (Replayed).
	Result Out
	// Retry is true when the record is listed in BatchItemFailures, for SQS to deliver again.
	Retry bool
	// Err explains a record that is not a success: fn's error (wrapped), ErrSkipped, or the
	// guard's reason, which matches with errors.Is the sentinel of its Kind (idem.ErrInProgress,
	// idem.ErrMismatch, idem.ErrInvalidKey, also for a key or fingerprint function's error, and
	// idem.ErrUnavailable). It may also be set for a success whose result could not be stored
	// or decoded.
	Err error
	// RoundTrips is the number of Redis round trips of the whole batch (0 for a record
	// answered without Redis).
	RoundTrips int
}

// Handle runs the batch and returns the records to deliver again. Its error is always nil:
// every failure is a record in BatchItemFailures. It is the function to pass to lambda.Start.
func (h *Handler[Out]) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp, _ := h.Run(ctx, ev)
	return resp, nil
}

// Run runs the batch as Handle does and also returns what happened to each record, in the
// batch's order, for a caller that logs or counts them.
func (h *Handler[Out]) Run(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, []Record[Out]) {
	fifo := h.isFIFO(ev.Records)
	b := h.newBatch(ev.Records)
	prev := previousInGroup(ev.Records, fifo)
	outs, errs := h.guard.DoBatch(ctx, b.items, func(_ []int, work func(int) error) {
		h.runRecords(prev, b.origin, b.item, work)
	})
	b.settle(outs, errs, prev, fifo)
	return b.response(), b.out
}

// isFIFO reports whether recs come from a FIFO queue: WithFIFO, or the first record's ARN.
func (h *Handler[Out]) isFIFO(recs []events.SQSMessage) bool {
	if h.cfg.fifo != nil {
		return *h.cfg.fifo
	}
	return len(recs) > 0 && strings.HasSuffix(recs[0].EventSourceARN, ".fifo")
}

// batch is one SQS batch on its way through Run: per record its outcome, the record whose key it
// shares, and its item in the guard's batch.
type batch[Out any] struct {
	out     []Record[Out]
	origin  []int // per record: the first record with the same key, or -1
	item    []int // per record: its item in items, or -1
	items   []idem.Item
	results []Out // per record: fn's value, once it ran
}

// newBatch derives every record's key first: a record whose key cannot be derived fails without
// reaching Redis, and a record whose key an earlier record holds waits for that record instead
// of claiming.
func (h *Handler[Out]) newBatch(recs []events.SQSMessage) *batch[Out] {
	b := &batch[Out]{out: make([]Record[Out], len(recs)), origin: make([]int, len(recs)),
		item: make([]int, len(recs)), results: make([]Out, len(recs))}
	firstOf := map[string]int{}
	for k, msg := range recs {
		b.out[k].MessageID = msg.MessageId
		b.origin[k], b.item[k] = -1, -1
		id, fp, err := h.keyOf(msg)
		b.out[k].Key = id
		if err != nil {
			b.out[k].Kind, b.out[k].Err = idem.InvalidKey, err
			continue
		}
		if o, ok := firstOf[id]; ok {
			b.origin[k] = o
			continue
		}
		firstOf[id] = k
		b.item[k] = len(b.items)
		b.items = append(b.items, idem.Item{Key: idem.Key{Scope: h.cfg.scope, ID: id}, Fingerprint: fp, Work: h.work(msg, &b.results[k])})
	}
	return b
}

// settle sets every record's outcome from the guard's, in the batch's order: an origin always
// precedes its duplicates, and a record the previous record of its FIFO group.
func (b *batch[Out]) settle(outs []idem.Outcome, errs []error, prev []int, fifo bool) {
	var held []bool // records of a FIFO group after its first failure, the failure included
	if fifo {
		held = make([]bool, len(b.out))
	}
	for k := range b.out {
		r := &b.out[k]
		switch {
		case b.origin[k] >= 0:
			r.duplicateOf(b.out[b.origin[k]])
		case b.item[k] >= 0:
			r.settle(outs[b.item[k]], errs[b.item[k]], b.results[k])
		}
		r.Retry = !success(r.Kind)
		if held != nil {
			holdGroup(r, k, prev, held)
		}
	}
}

// duplicateOf gives r, a record whose key o holds, o's outcome: Replayed when o succeeded.
func (r *Record[Out]) duplicateOf(o Record[Out]) {
	r.Duplicate, r.Result, r.RoundTrips = true, o.Result, o.RoundTrips
	if r.Kind = o.Kind; success(o.Kind) {
		r.Kind = idem.Replayed
	} else {
		r.Err = fmt.Errorf("idemsqs: duplicate of message %s, which did not succeed: %w", o.MessageID, o.Err)
	}
}

// settle gives r the guard's outcome o and error err; ran is fn's value when it ran here.
func (r *Record[Out]) settle(o idem.Outcome, err error, ran Out) {
	r.Kind, r.RoundTrips, r.Err = o.Kind, o.RoundTrips, err
	switch o.Kind {
	case idem.Executed, idem.LockLost, idem.NotStored, idem.ExecutedUnguarded:
		r.Result = ran
	case idem.NotReplayable:
		if o.Ran {
			r.Result = ran
		}
	case idem.Replayed:
		if derr := json.Unmarshal(o.Result.Body, &r.Result); derr != nil {
			r.Err = fmt.Errorf("idemsqs: decode the stored result of message %s: %w", r.MessageID, derr)
		}
	}
}

// holdGroup lists r, record k of a FIFO queue, for delivery again when an earlier record of its
// group failed: every later record of the group is delivered again, in order. None of them ran
// (runRecords held them back): DoBatch reports those it claimed as Failed.
func holdGroup[Out any](r *Record[Out], k int, prev []int, held []bool) {
	if p := prev[k]; p >= 0 && held[p] {
		if !r.Retry || r.Kind == idem.Failed {
			r.Retry, r.Err = true, ErrSkipped
		}
		held[k] = true
	}
	held[k] = held[k] || r.Retry
}

// response lists the records to deliver again.
func (b *batch[Out]) response() events.SQSEventResponse {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, r := range b.out {
		if r.Retry {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageID})
		}
	}
	return resp
}

// success reports an outcome after which the record must not be delivered again: its work
// ran here (even if its result could not be stored), or ran before (even if its result is not
// replayable: NotReplayable).
func success(k idem.Kind) bool {
	switch k {
	case idem.Executed, idem.Replayed, idem.ExecutedUnguarded, idem.LockLost, idem.NotStored, idem.NotReplayable:
		return true
	}
	return false
}

// keyOf returns a record's key ID and fingerprint.
func (h *Handler[Out]) keyOf(msg events.SQSMessage) (string, idem.Fingerprint, error) {
	id := msg.MessageId
	if h.cfg.key != nil {
		var err error
		if id, err = h.cfg.key(msg); err != nil {
			return "", idem.Fingerprint{}, fmt.Errorf("idemsqs: key of message %s: %w: %w", msg.MessageId, idem.ErrInvalidKey, err)
		}
	}
	if err := (idem.Key{Scope: h.cfg.scope, ID: id}).Validate(); err != nil {
		return id, idem.Fingerprint{}, fmt.Errorf("idemsqs: message %s: %w", msg.MessageId, err)
	}
	if h.cfg.fingerprint == nil {
		return id, idem.FingerprintOf([]byte(msg.Body)), nil
	}
	fp, err := h.cfg.fingerprint(msg)
	if err != nil {
		return id, idem.Fingerprint{}, fmt.Errorf("idemsqs: fingerprint of message %s: %w: %w", msg.MessageId, idem.ErrInvalidKey, err)
	}
	return id, fp, nil
}

// work is the guarded work of one record: fn, its result kept in *res and stored as JSON. A
// result that cannot be encoded is not fn's failure: fn ran, so the guard keeps a marker in place
// of the result (NotReplayable) and a redelivery does not run fn again.
func (h *Handler[Out]) work(msg events.SQSMessage, res *Out) idem.Work {
	return func(ctx context.Context) (idem.Result, error) {
		v, err := h.fn(ctx, msg)
		if err != nil {
			return idem.Result{}, fmt.Errorf("idemsqs: message %s: %w", msg.MessageId, err)
		}
		*res = v
		body, err := json.Marshal(v)
		if err != nil {
			return idem.Result{}, &unencodable.Error{Err: fmt.Errorf("idemsqs: encode the result of message %s as JSON: %w", msg.MessageId, err)}
		}
		return idem.Result{Body: body}, nil
	}
}

// previousInGroup returns, per record, the index of the previous record of its FIFO message
// group, or -1: on a standard queue every record is -1, as if alone in its group.
func previousInGroup(recs []events.SQSMessage, fifo bool) []int {
	prev := make([]int, len(recs))
	last := map[string]int{}
	for k, msg := range recs {
		prev[k] = -1
		if !fifo {
			continue
		}
		id := msg.Attributes["MessageGroupId"]
		if p, ok := last[id]; ok {
			prev[k] = p
		}
		last[id] = k
	}
	return prev
}

// helpersAfter is how long the handler's own goroutine runs the records of a batch alone before
// it starts the other WithConcurrency-1 workers. A batch of quick records (the common case of a
// consumer that writes to a database in a millisecond or less is already several of these)
// then costs no goroutine, no wake-up of another thread and no channel, which on a quiet
// machine cost more than the works themselves; a batch of slow records starts its concurrency at
// most this much later.
const helpersAfter = 100 * time.Microsecond

// runRecords is DoBatch's run: the records in the batch's order, each after the previous record
// of its FIFO group and after the record it duplicates, by the calling goroutine and, once
// helpersAfter has passed, by up to cfg.concurrency-1 more. After a failure, a group's later
// records are not run (DoBatch releases their claims); a duplicate takes its origin's success.
// A record only ever waits for records before it in the batch, which are taken first, so the
// waits cannot form a cycle, and a worker never holds a record it cannot run yet.
func (h *Handler[Out]) runRecords(prev, origin, item []int, work func(int) error) {
	s := &scheduler{prev: prev, origin: origin, item: item, done: make([]bool, len(prev)), ok: make([]bool, len(prev))}
	s.cond.L = &s.mu
	var helpers sync.WaitGroup
	if extra := min(h.cfg.concurrency, len(prev)) - 1; extra > 0 {
		timer := time.AfterFunc(helpersAfter, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.over {
				return
			}
			for range extra {
				helpers.Go(func() { s.work(work) })
			}
		})
		defer func() {
			timer.Stop()
			s.mu.Lock()
			s.over = true
			s.mu.Unlock()
			helpers.Wait()
		}()
	}
	s.work(work)
}

// scheduler hands the records of a batch to the workers of runRecords.
type scheduler struct {
	prev, origin, item []int

	mu       sync.Mutex
	cond     sync.Cond // signalled when a record is done and parked records became ready
	next     int       // the first record not yet taken
	ready    []int     // records taken and parked, whose records to wait for are now done
	parked   []int     // records taken that wait for a record not done yet
	done, ok []bool    // per record: settled; settled and succeeded (ran, or replayed)
	over     bool      // the batch's run returned: no more workers
}

// work runs records until none is left to take.
func (s *scheduler) work(work func(int) error) {
	for k := s.take(); k >= 0; k = s.take() {
		ok := work(s.item[k]) == nil
		s.mu.Lock()
		s.settle(k, ok)
		s.mu.Unlock()
	}
}

// take returns the next record whose work is to run, settling on the way those that run none (a
// duplicate, a record held back by its group's failure, a record without a key), or -1 when no
// record is left to take. It waits while the only records left wait for others still running.
func (s *scheduler) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		k := -1
		switch {
		case len(s.ready) > 0:
			k, s.ready = s.ready[0], s.ready[1:]
		case s.next < len(s.item):
			k = s.next
			s.next++
			if s.waitsFor(k) >= 0 {
				s.parked = append(s.parked, k)
				continue
			}
		case len(s.parked) > 0:
			s.cond.Wait()
			continue
		default:
			return -1
		}
		switch p, o := s.prev[k], s.origin[k]; {
		case p >= 0 && !s.ok[p]:
			s.settle(k, false)
		case o >= 0:
			s.settle(k, s.ok[o])
		case s.item[k] < 0:
			s.settle(k, false)
		default:
			return k
		}
	}
}

// waitsFor returns a record that k waits for and that is not done, or -1.
func (s *scheduler) waitsFor(k int) int {
	for _, w := range [2]int{s.prev[k], s.origin[k]} {
		if w >= 0 && !s.done[w] {
			return w
		}
	}
	return -1
}

// settle records k's success and makes ready the parked records that waited only for it. The
// caller holds mu.
func (s *scheduler) settle(k int, ok bool) {
	s.done[k], s.ok[k] = true, ok
	if len(s.parked) == 0 {
		return
	}
	still := s.parked[:0]
	for _, p := range s.parked {
		if s.waitsFor(p) < 0 {
			s.ready = append(s.ready, p)
		} else {
			still = append(still, p)
		}
	}
	s.parked = still
	s.cond.Broadcast()
}
