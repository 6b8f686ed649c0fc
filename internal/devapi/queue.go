package devapi

import (
	"context"
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

// The in-process queue's URL, and its batch size: that of the template's event source mapping.
const (
	localQueueURL  = "https://sqs.local/000000000000/events.fifo"
	localBatchSize = 10
)

// localQueue is the in-process stand-in for the sqs sink's FIFO queue and its event source
// mapping: the webhook functions' sink sends to it (sink.SQS, with this as its client, so the
// messages are those AWS would carry), and it hands the messages to the consumer function in
// batches. Messages sent during a webhook invocation are delivered once it returned (release),
// so the webhook's log line comes before the consumer's, as in AWS. A record the consumer fails
// is reported on the access log and not delivered again (in AWS it is, until maxReceiveCount
// sends it to the dead-letter queue).
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

// SendMessage queues the message; it is delivered after the next release, unless the queue is
// closed by then.
func (q *localQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent++
	id := "local-" + strconv.Itoa(q.sent)
	q.pending = append(q.pending, consumerhandler.Delivered(in, id, 1))
	return &sqs.SendMessageOutput{MessageId: &id}, nil
}

// release delivers the pending messages to the consumer in the background. A nil queue (a
// template without consumer) has nothing to deliver.
func (q *localQueue) release() {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	msgs := q.pending
	if q.closed || len(msgs) == 0 {
		return
	}
	q.pending = nil
	q.wg.Go(func() {
		for batch := range slices.Chunk(msgs, localBatchSize) {
			ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
			resp, err := q.consume(ctx, events.SQSEvent{Records: batch})
			cancel()
			for _, m := range batch {
				if err != nil || slices.ContainsFunc(resp.BatchItemFailures, func(f events.SQSBatchItemFailure) bool { return f.ItemIdentifier == m.MessageId }) {
					fmt.Fprintf(q.log, "local queue: message %s failed; not delivered again (in AWS: again, then to the dead-letter queue)\n", m.MessageId)
				}
			}
		}
	})
}

// Close delivers nothing more and waits for the deliveries under way.
func (q *localQueue) Close() error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wg.Wait()
	return nil
}
