// Package wrapguide holds the code of docs/library.md's sections on the guard, Wrap and DoBatch,
// as the guide shows it, and runs it (internal/guide checks that the guide's blocks are here).
package wrapguide

import (
	"context"
	"errors"
	"log"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

// newGuard builds the client and the guard. Call it once per execution environment, from main
// (or init), and build what uses the guard after it, not in a package-level variable: those are
// initialised before init runs, and would be given a nil guard (which the constructors refuse).
func newGuard() (*idem.Guard, error) {
	// ContextTimeoutEnabled: the client honours the deadlines the guard gives each command. The
	// final store call's is the claim's expiry, so a store that stops answering is reported
	// (NotStored) as another delivery can take the key, not after the client's timeouts.
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	// Result TTL: longer than the source's retry window (SQS: the queue's retention period).
	return idem.New(rdb, idem.WithPrefix("orders"), idem.WithResultTTL(5*24*time.Hour))
}

type Order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}
type Receipt struct {
	OrderID string `json:"order_id"`
	Charged int    `json:"charged"`
}

func charge(ctx context.Context, o Order) (Receipt, error) {
	return Receipt{OrderID: o.ID, Charged: o.Amount}, nil // your work
}

// newHandler is keyed on the order id; the fingerprint (nil: the canonical JSON of the whole
// input) tells a retry (same order) from a reuse of the id with another order (ErrMismatch).
func newHandler() (func(context.Context, Order) (Receipt, error), error) {
	guard, err := newGuard()
	if err != nil {
		return nil, err
	}
	return idem.Wrap(guard, "orders", func(o Order) string { return o.ID }, nil, charge)
}

func main() {
	handler, err := newHandler()
	if err != nil {
		log.Fatal(err) // one line in the init's log; Lambda reports the failed init
	}
	lambda.Start(handler)
}

var _ = main // compiled here, run by Lambda

func TestTheGuidesWrappedHandlerRunsOncePerOrder(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	t.Setenv("REDIS_ADDR", m.Addr())
	handler, err := newHandler()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := handler(ctx, Order{ID: "ord_1", Amount: 1250})
	if err != nil || first != (Receipt{OrderID: "ord_1", Charged: 1250}) {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	again, err := handler(ctx, Order{ID: "ord_1", Amount: 1250})
	if err != nil || again != first {
		t.Fatalf("retry: %+v, %v; want the first receipt", again, err)
	}
	if n := len(m.Keys()); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
	if _, err := handler(ctx, Order{ID: "ord_1", Amount: 999}); !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("the id with another order: %v; want idem.ErrMismatch", err)
	}
	m.Close()
	if _, err := handler(ctx, Order{ID: "ord_2", Amount: 1}); !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Redis down: %v; want idem.ErrUnavailable", err)
	}
}

type job struct {
	ID   string
	Body []byte
	ran  *int
}

func (j job) Run(ctx context.Context) (idem.Result, error) {
	*j.ran++
	if string(j.Body) == "poison" {
		return idem.Result{}, errors.New("cannot process")
	}
	return idem.Result{Body: j.Body}, nil
}

func TestTheGuidesBatchStopsAtTheFirstFailure(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	t.Setenv("REDIS_ADDR", m.Addr())
	guard, err := newGuard()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ran int
	jobs := []job{{"j1", []byte("a"), &ran}, {"j2", []byte("poison"), &ran}, {"j3", []byte("c"), &ran}}

	items := make([]idem.Item, len(jobs))
	for i, j := range jobs {
		items[i] = idem.Item{Key: idem.Key{Scope: "jobs", ID: j.ID}, Fingerprint: idem.FingerprintOf(j.Body), Work: j.Run}
	}
	outs, errs := guard.DoBatch(ctx, items, func(claimed []int, work func(i int) error) {
		for _, i := range claimed { // in order; run them in goroutines for concurrency
			if err := work(i); err != nil {
				break // the items not run are released and run on the next delivery
			}
		}
	})

	want := []idem.Kind{idem.Executed, idem.Failed, idem.Failed}
	for i, out := range outs {
		if out.Kind != want[i] {
			t.Errorf("item %d: %s (%v), want %s", i, out.Kind, errs[i], want[i])
		}
	}
	if ran != 2 {
		t.Fatalf("%d works ran, want 2 (the third is held back)", ran)
	}
}
