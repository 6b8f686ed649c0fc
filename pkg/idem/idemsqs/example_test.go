package idemsqs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemsqs"
)

// An SQS consumer that runs each order once, keyed on the order id in the body, and reports
// failed records so that SQS delivers only those again. In a Lambda function the handler is
// built at init and passed to lambda.Start(h.Handle).
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	prefix := "example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	guard, err := idem.New(rdb, idem.WithPrefix(prefix), idem.WithResultTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	type order struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	ship := func(ctx context.Context, msg events.SQSMessage) (string, error) {
		var o order
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
			return "", err
		}
		if o.Amount <= 0 {
			return "", fmt.Errorf("order %s: amount %d", o.ID, o.Amount)
		}
		fmt.Println("shipping", o.ID)
		return "shipped " + o.ID, nil
	}
	h, err := idemsqs.New(guard, ship, idemsqs.WithKey(func(msg events.SQSMessage) (string, error) {
		var o order
		err := json.Unmarshal([]byte(msg.Body), &o)
		return o.ID, err
	}))
	if err != nil {
		panic(err)
	}

	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: `{"id":"ord_1","amount":1250}`},
		{MessageId: "m2", Body: `{"id":"ord_2","amount":0}`},
		{MessageId: "m3", Body: `{"id":"ord_1","amount":1250}`}, // the same order, sent twice
	}}
	resp, records := h.Run(context.Background(), ev)
	for _, r := range records {
		fmt.Printf("%s %s %q\n", r.MessageID, r.Kind, r.Result)
	}
	fmt.Println("deliver again:", resp.BatchItemFailures)

	// SQS delivers the batch again: ord_1 is replayed, not shipped twice.
	_, records = h.Run(context.Background(), ev)
	fmt.Println(records[0].MessageID, records[0].Kind, records[0].Result)
	// Output:
	// shipping ord_1
	// m1 executed "shipped ord_1"
	// m2 failed ""
	// m3 replayed "shipped ord_1"
	// deliver again: [{m2}]
	// m1 replayed shipped ord_1
}
