package idem_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/pkg/idem"
)

// Order and Receipt are a typed handler's input and output.
type Order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

type Receipt struct {
	OrderID string `json:"order_id"`
	Charged int    `json:"charged"`
}

// examplePrefix keeps each run's keys apart on a shared Redis.
func examplePrefix() string { return "example-" + strconv.FormatInt(time.Now().UnixNano(), 36) }

// Any func(context.Context, In) (Out, error), a Lambda handler for example, runs once per key:
// a retry gets the first result back, decoded from the JSON stored in Redis.
func ExampleWrap() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	// At init, once per execution environment.
	guard, err := idem.New(rdb, idem.WithPrefix(examplePrefix()), idem.WithResultTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	charges := 0
	charge := func(ctx context.Context, o Order) (Receipt, error) {
		charges++
		return Receipt{OrderID: o.ID, Charged: o.Amount}, nil
	}
	// Keyed on the order id; the fingerprint (nil: the whole order) tells a retry from a reuse.
	handler, err := idem.Wrap(guard, "orders", func(o Order) string { return o.ID }, nil, charge)
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	for range 2 {
		r, err := handler(ctx, Order{ID: "ord_1", Amount: 1250})
		fmt.Println(r, err)
	}
	_, err = handler(ctx, Order{ID: "ord_1", Amount: 999})
	fmt.Println(errors.Is(err, idem.ErrMismatch))
	fmt.Println("charged", charges, "time")
	// Output:
	// {ord_1 1250} <nil>
	// {ord_1 1250} <nil>
	// true
	// charged 1 time
}

// A batch (the records of one SQS event, say) is claimed in one round trip and its results
// stored in one more, up to 500 keys; each record keeps the outcome Do would give it.
func ExampleGuard_DoBatch() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	guard, err := idem.New(rdb, idem.WithPrefix(examplePrefix()), idem.WithResultTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	process := func(body string) idem.Work {
		return func(ctx context.Context) (idem.Result, error) {
			if body == "poison" {
				return idem.Result{}, errors.New("cannot process")
			}
			return idem.Result{Body: []byte("processed " + body)}, nil
		}
	}
	var items []idem.Item
	for _, m := range []struct{ id, body string }{{"m1", "a"}, {"m2", "poison"}, {"m1", "a"}, {"m3", "c"}} {
		items = append(items, idem.Item{Key: idem.Key{Scope: "queue", ID: m.id}, Fingerprint: idem.FingerprintOf([]byte(m.body)), Work: process(m.body)})
	}
	outs, _ := guard.DoBatch(context.Background(), items, nil) // nil: run the works in order
	for i, out := range outs {
		fmt.Println(items[i].Key.ID, out.Kind, out.RoundTrips)
	}
	// Output:
	// m1 executed 2
	// m2 failed 2
	// m1 in_progress 2
	// m3 executed 2
}

// At init, after building the guard, Warm has the server compile the guard's scripts within a
// bound, so the first invocation's completion sends only the script's SHA. Its error changes
// nothing but that: the first call then sends the script's source.
func ExampleGuard_Warm() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	guard, err := idem.New(rdb, idem.WithPrefix(examplePrefix()))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println(guard.Warm(ctx))
	// Output:
	// <nil>
}
