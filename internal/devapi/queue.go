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

// Settings of the in-process queue, those of the template's queue where they matter.
const (
	// localQueueURL is the queue URL the webhook functions' sqs sink sends to: FIFO, so the
	// sink sets group and deduplication ids as it does in AWS.
	localQueueURL = "https://sqs.local/000000000000/events.fifo"
	// localMaxReceives is the template queue's maxReceiveCount: after as many failed
	// deliveries, a message is dropped (in AWS it goes to the dead-letter queue).
	localMaxReceives = 5
	// localRedeliveryDelay stands in for the visibility timeout before a failed record is
	// delivered again; shorter than AWS's 30 s, so a developer sees it.
	localRedeliveryDelay = 2 * time.Second
	// localBatchSize is the event source mapping's BatchSize.
	localBatchSize = 10
)

// localQueue is the in-process stand-in for the sqs sink's FIFO queue and its event source
// mapping: the webhook functions' sink sends to it (sink.SQS, with this as its client, so the
// messages are those AWS would carry), and it hands the messages to the consumer function as
// SQS batches, delivering again the records the consumer reports as failed.
//
// Messages sent during a webhook invocation are delivered once the invocation returned
// (release), so the webhook's log line comes before the consumer's, as it does in AWS.
type localQueue struct {
	consume func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	timeout time.Duration
	log     io.Writer

	mu      sync.Mutex
	pending []events.SQSMessage
	counts  map[string]int // deliveries per message id
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

// release delivers every pending message to the consumer, in batches, in the background. A
// nil queue (a template without consumer) has nothing to deliver.
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
	for i := range msgs {
		q.counts[msgs[i].MessageId]++
		msgs[i].Attributes["ApproximateReceiveCount"] = strconv.Itoa(q.counts[msgs[i].MessageId])
	}
	q.wg.Go(func() {
		for batch := range slices.Chunk(msgs, localBatchSize) {
			q.deliver(batch)
		}
	})
}

// deliver invokes the consumer with one batch and queues its failed records again, or drops
// those delivered localMaxReceives times.
func (q *localQueue) deliver(batch []events.SQSMessage) {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	resp, err := q.consume(ctx, events.SQSEvent{Records: batch})
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var again []events.SQSMessage
	q.mu.Lock()
	for _, m := range batch {
		switch {
		case err == nil && !failed[m.MessageId]:
			delete(q.counts, m.MessageId)
		case q.counts[m.MessageId] >= localMaxReceives:
			fmt.Fprintf(q.log, "local queue: message %s failed %d deliveries; dropped (in AWS: the dead-letter queue)\n", m.MessageId, localMaxReceives)
			delete(q.counts, m.MessageId)
		default:
			again = append(again, m)
		}
	}
	q.mu.Unlock()
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
