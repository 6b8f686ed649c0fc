package devapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	consumerhandler "github.com/idemlambda/idem/internal/functions/consumer/handler"
)

// Settings of the in-process queue: those of the template's queue and event source mapping
// (FIFO, maxReceiveCount 5, BatchSize 10), with a redelivery delay shorter than the visibility
// timeout, so a developer sees it.
const (
	localQueueURL        = "https://sqs.local/000000000000/events.fifo"
	localMaxReceives     = 5
	localBatchSize       = 10
	localRedeliveryDelay = 2 * time.Second
)

// localQueue is the in-process stand-in for the sqs sink's FIFO queue and its event source
// mapping: the webhook functions' sink sends to it (sink.SQS, with this as its client, so the
// messages are those AWS would carry), and it hands the messages to the consumer function in
// batches, delivering again the records the consumer reports as failed, and dropping those
// delivered localMaxReceives times (in AWS: the dead-letter queue). Messages sent during a
// webhook invocation are delivered once it returned (release), so the webhook's log line comes
// before the consumer's, as in AWS.
type localQueue struct {
	consume func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	timeout time.Duration
	log     io.Writer

	mu      sync.Mutex
	pending []events.SQSMessage
	sent    int
	closed  bool
	wg      sync.WaitGroup
}

// SendMessage queues the message; it is delivered after the next release.
func (q *localQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, errors.New("devapi: the local queue is closed")
	}
	q.sent++
	id := "local-" + strconv.Itoa(q.sent)
	q.pending = append(q.pending, consumerhandler.Delivered(in, id, 0))
	return &sqs.SendMessageOutput{MessageId: &id}, nil
}

// release delivers the pending messages and again to the consumer in the background. A nil
// queue (a template without consumer) has nothing to deliver.
func (q *localQueue) release(again ...events.SQSMessage) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	msgs := append(q.pending, again...)
	if q.closed || len(msgs) == 0 {
		return
	}
	q.pending = nil
	q.wg.Go(func() {
		for batch := range slices.Chunk(msgs, localBatchSize) {
			q.deliver(batch)
		}
	})
}

// deliver invokes the consumer with one batch, and releases its failed records again after
// localRedeliveryDelay.
func (q *localQueue) deliver(batch []events.SQSMessage) {
	var again []events.SQSMessage
	for i := range batch {
		n, _ := strconv.Atoi(batch[i].Attributes["ApproximateReceiveCount"])
		batch[i].Attributes["ApproximateReceiveCount"] = strconv.Itoa(n + 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	resp, err := q.consume(ctx, events.SQSEvent{Records: batch})
	for _, m := range batch {
		switch {
		case err == nil && !slices.ContainsFunc(resp.BatchItemFailures, func(f events.SQSBatchItemFailure) bool { return f.ItemIdentifier == m.MessageId }):
		case m.Attributes["ApproximateReceiveCount"] == strconv.Itoa(localMaxReceives):
			fmt.Fprintf(q.log, "local queue: message %s failed %d deliveries; dropped (in AWS: the dead-letter queue)\n", m.MessageId, localMaxReceives)
		default:
			again = append(again, m)
		}
	}
	if len(again) > 0 {
		time.AfterFunc(localRedeliveryDelay, func() { q.release(again...) })
	}
}

// Close delivers nothing more and waits for the deliveries under way.
func (q *localQueue) Close() error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wg.Wait()
	return nil
}
