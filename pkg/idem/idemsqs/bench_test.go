package idemsqs_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemsqs"
)

// BenchmarkSQSBatch10 is an SQS batch of 10 new records through Handler.Run, against a private
// redis-server on loopback. `make bench` compares it with pkg/idem's BenchmarkFloorSetNX, a
// single bare SET NX, measured in the same rounds; it reports round-trips/op and cmds/op as the
// client sent them (a pipeline is one round trip).
func BenchmarkSQSBatch10(b *testing.B) { benchSQSBatch10(b, testsupport.StartRedis(b).Addr()) }

// benchSQSBatch10 runs batches of 10 new records against the redis-server at addr.
func benchSQSBatch10(b *testing.B, addr string) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4})
	b.Cleanup(func() { c.Close() })
	trips, cmds := &roundTrips{}, &commands{}
	c.AddHook(trips)
	c.AddHook(cmds)
	g, err := idem.New(c)
	if err != nil {
		b.Fatal(err)
	}
	h, err := idemsqs.New(g, func(context.Context, events.SQSMessage) (struct{}, error) { return struct{}{}, nil })
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 10)}
	run := func(i int) {
		for j := range ev.Records {
			ev.Records[j] = events.SQSMessage{MessageId: "m-" + strconv.Itoa(i) + "-" + strconv.Itoa(j),
				Body: `{"id":"evt_1NmY2bKx7gT8sQ4r"}`, EventSourceARN: standardARN}
		}
		if resp, _ := h.Handle(ctx, ev); len(resp.BatchItemFailures) != 0 {
			b.Fatal(resp.BatchItemFailures)
		}
	}
	run(-1) // connects, as the first batch of an environment does
	tripsBefore, cmdsBefore := trips.n.Load(), cmds.n.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(trips.n.Load()-tripsBefore)/float64(b.N), "round-trips/op")
	b.ReportMetric(float64(cmds.n.Load()-cmdsBefore)/float64(b.N), "cmds/op")
}

// commands counts the commands a client sends, those of pipelines included.
type commands struct{ roundTrips }

func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds[0].Name()) {
			c.n.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}
