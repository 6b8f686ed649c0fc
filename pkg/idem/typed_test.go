package idem

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/redis/go-redis/v9"
)

type order struct {
	ID       string `json:"id"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

type receipt struct {
	OrderID string    `json:"order_id"`
	Charged int       `json:"charged"`
	Run     int32     `json:"run"`
	At      time.Time `json:"at"`
}

func orderID(o order) string { return o.ID }

// mustWrap is Wrap for a test whose arguments are valid.
func mustWrap[In, Out any](t testing.TB, g *Guard, scope string, key func(In) string, fp func(In) (Fingerprint, error), fn func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	t.Helper()
	w, err := Wrap(g, scope, key, fp, fn)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A guard built later than the wrapped function (a package-level declaration that runs before
// init sets the guard) is refused at construction, not a panic at the first call.
func TestWrapRefusesANilGuardANilFunctionAndABadScope(t *testing.T) {
	g, err := New(testsupport.StartMiniredis(t).NewClient())
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, order) (receipt, error) { return receipt{}, nil }
	if w, err := Wrap(nil, "orders", orderID, nil, fn); w != nil || err == nil {
		t.Errorf("nil guard: %v; want an error and no function", err)
	}
	if w, err := Wrap[order, receipt](g, "orders", orderID, nil, nil); w != nil || err == nil {
		t.Errorf("nil function: %v; want an error and no function", err)
	}
	if _, err := Wrap(g, "two words", orderID, nil, fn); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("bad scope: %v; want ErrInvalidKey", err)
	}
}

// 50 calls with one key, from 4 environments at once: the function runs once, the others are
// told it is in progress (or, if they come late, get its result).
func testWrapConcurrentCallsExecuteOnce(t *testing.T, b backend) {
	var runs atomic.Int32
	charge := func(ctx context.Context, o order) (receipt, error) {
		n := runs.Add(1)
		time.Sleep(50 * time.Millisecond)
		return receipt{OrderID: o.ID, Charged: o.Amount, Run: n}, nil
	}
	var fns []func(context.Context, order) (receipt, error)
	for range 4 {
		fns = append(fns, mustWrap(t, b.guard(t, b.newClient(t)), "orders", orderID, nil, charge))
	}
	in := order{ID: "ord_concurrent", Amount: 1250, Currency: "EUR"}
	var wg sync.WaitGroup
	var ok, inProgress atomic.Int32
	start := make(chan struct{})
	for i := range 50 {
		wg.Go(func() {
			<-start
			r, err := fns[i%len(fns)](context.Background(), in)
			switch {
			case err == nil && r.OrderID == in.ID && r.Charged == 1250 && r.Run == 1:
				ok.Add(1)
			case errors.Is(err, ErrInProgress) && r == (receipt{}):
				inProgress.Add(1)
			default:
				t.Errorf("call %d: %+v, %v", i, r, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if runs.Load() != 1 || ok.Load() < 1 || ok.Load()+inProgress.Load() != 50 {
		t.Fatalf("ran %d times; %d results, %d in progress; want 1 run and every call answered", runs.Load(), ok.Load(), inProgress.Load())
	}
	if r, err := fns[0](context.Background(), in); err != nil || r.Run != 1 {
		t.Fatalf("after the first completed: %+v, %v; want its result", r, err)
	}
}

func testWrapFailureReleasesClaim(t *testing.T, b backend) {
	errDeclined := errors.New("card declined")
	var runs atomic.Int32
	charge := mustWrap(t, b.guard(t, b.newClient(t)), "orders", orderID, nil, func(ctx context.Context, o order) (receipt, error) {
		if runs.Add(1) == 1 {
			return receipt{}, errDeclined
		}
		return receipt{OrderID: o.ID, Charged: o.Amount, Run: runs.Load()}, nil
	})
	in := order{ID: "ord_fails_once", Amount: 10, Currency: "EUR"}
	if _, err := charge(context.Background(), in); !errors.Is(err, errDeclined) {
		t.Fatalf("failed call: %v; want the function's own error", err)
	}
	r, err := charge(context.Background(), in)
	if err != nil || r.Run != 2 {
		t.Fatalf("retry after the failure: %+v, %v; want the function run again", r, err)
	}
}

func testWrapReplayDecodes(t *testing.T, b backend) {
	var runs atomic.Int32
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	charge := mustWrap(t, b.guard(t, b.newClient(t)), "orders", orderID, nil, func(ctx context.Context, o order) (receipt, error) {
		return receipt{OrderID: o.ID, Charged: o.Amount, Run: runs.Add(1), At: at}, nil
	})
	in := order{ID: "ord_replay", Amount: 990, Currency: "USD"}
	first, err := charge(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	// Another environment, with nothing in memory: the result comes from the store.
	other := mustWrap(t, b.guard(t, b.newClient(t)), "orders", orderID, nil, func(ctx context.Context, o order) (receipt, error) {
		return receipt{Run: runs.Add(1)}, nil
	})
	again, err := other(context.Background(), in)
	if err != nil || again != first || !again.At.Equal(at) || runs.Load() != 1 {
		t.Fatalf("replay: %+v, %v; want %+v decoded, and no second run", again, err, first)
	}
	// A result that does not decode into Out is an error, not a zero value.
	bad := mustWrap(t, b.guard(t, b.newClient(t)), "orders", orderID, nil, func(ctx context.Context, o order) (int, error) { return 0, nil })
	if _, err := bad(context.Background(), in); err == nil {
		t.Fatal("a stored receipt decoded into an int")
	}
}

func testWrapMismatch(t *testing.T, b backend) {
	charge := mustWrap(t, b.guard(t, b.newClient(t)), "orders", orderID, nil, func(ctx context.Context, o order) (receipt, error) {
		return receipt{OrderID: o.ID}, nil
	})
	if _, err := charge(context.Background(), order{ID: "ord_reused", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := charge(context.Background(), order{ID: "ord_reused", Amount: 2}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("same order id, other amount: %v; want ErrMismatch", err)
	}
	// A fingerprint over the id only makes the amount irrelevant.
	idOnly := mustWrap(t, b.guard(t, b.newClient(t)), "orders", orderID, func(o order) (Fingerprint, error) { return FingerprintOf([]byte(o.ID)), nil },
		func(ctx context.Context, o order) (receipt, error) {
			return receipt{OrderID: o.ID, Charged: o.Amount}, nil
		})
	first, _ := idOnly(context.Background(), order{ID: "ord_id_only", Amount: 1})
	if r, err := idOnly(context.Background(), order{ID: "ord_id_only", Amount: 2}); err != nil || r != first {
		t.Fatalf("fingerprint over the id: %+v, %v; want the first result", r, err)
	}
}

func testWrapDefaultKey(t *testing.T, b backend) {
	var runs atomic.Int32
	echo := mustWrap(t, b.guard(t, b.newClient(t)), "echo", nil, nil, func(ctx context.Context, in map[string]any) (int32, error) {
		return runs.Add(1), nil
	})
	ctx := context.Background()
	// The same input written in another order is the same key; another input is another key.
	a, _ := echo(ctx, map[string]any{"a": 1, "b": map[string]any{"x": true, "y": "z"}})
	a2, _ := echo(ctx, map[string]any{"b": map[string]any{"y": "z", "x": true}, "a": 1})
	c, _ := echo(ctx, map[string]any{"a": 2})
	if a != 1 || a2 != 1 || c != 2 {
		t.Fatalf("runs %d %d %d; want 1 1 2", a, a2, c)
	}
	if _, err := echo(ctx, map[string]any{"f": func() {}}); err == nil {
		t.Fatal("an input that is not JSON got a key")
	}
}

// Wrap costs what Do costs: 2 round trips for a first call, 1 for a replay or an in-progress
// duplicate.
func TestWrapKeepsTheRoundTripBudget(t *testing.T) {
	testsupport.SharedRedis(t)
	c := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr()})
	defer c.Close()
	trips := &testsupport.CommandCounter{}
	c.AddHook(trips)
	g, err := New(c, WithPrefix(testsupport.UniquePrefix(t)+"idem"))
	if err != nil {
		t.Fatal(err)
	}
	hold, started := make(chan struct{}), make(chan struct{})
	charge := mustWrap(t, g, "orders", orderID, nil, func(ctx context.Context, o order) (receipt, error) {
		if o.ID == "held" {
			close(started)
			<-hold
		}
		return receipt{OrderID: o.ID}, nil
	})
	ctx := context.Background()
	charge(ctx, order{ID: "warm"}) // sends the script's source, as an environment's first call does
	go charge(ctx, order{ID: "held"})
	<-started
	defer close(hold)
	for _, tc := range []struct {
		name  string
		in    order
		trips int64
	}{{"first call", order{ID: "new"}, 2}, {"replay", order{ID: "new"}, 1}, {"in-progress duplicate", order{ID: "held"}, 1}} {
		trips.RoundTrips.Store(0)
		_, err := charge(ctx, tc.in)
		if got := trips.RoundTrips.Load(); got != tc.trips {
			t.Errorf("%s: %d round trips (%v), want %d", tc.name, got, err, tc.trips)
		}
	}
}
