package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/ledger"
)

// scoped builds a scoped key the way callers do: the principal and the client's key together,
// so two principals using the same idempotency key never share a payment.
func scoped(principal, key string) string { return principal + ":" + key }

// payment returns a payment of principal with every field set.
func payment(principal, id string, amount int64) ledger.Payment {
	return ledger.Payment{
		ID:          id,
		Principal:   principal,
		Amount:      amount,
		Currency:    "EUR",
		Status:      "succeeded",
		CreatedAt:   time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600)),
		Fingerprint: "sha256:" + strings.Repeat("ab", 32),
	}
}

// stored returns p as the ledger returns it: CreatedAt in UTC.
func stored(p ledger.Payment) ledger.Payment {
	p.CreatedAt = p.CreatedAt.UTC()
	return p
}

// contract is the behaviour every Ledger implementation must have. Each case gets an empty ledger.
var contract = []struct {
	name string
	run  func(t *testing.T, l ledger.Ledger)
}{
	{"CreateReturnsThePaymentAndGetReadsItBack", func(t *testing.T, l ledger.Ledger) {
		ctx := context.Background()
		p := payment("alice", "pay_1", 1250)
		got, err := l.Create(ctx, scoped("alice", "k1"), p)
		if err != nil || got != stored(p) {
			t.Fatalf("Create = %+v, %v; want %+v, nil", got, err, stored(p))
		}
		if got, err := l.Get(ctx, "alice", "pay_1"); err != nil || got != stored(p) {
			t.Errorf("Get = %+v, %v; want %+v, nil", got, err, stored(p))
		}
	}},
	{"CreatedAtIsReturnedInUTCToTheNanosecond", func(t *testing.T, l ledger.Ledger) {
		ctx := context.Background()
		p := payment("alice", "pay_1", 1)
		if _, err := l.Create(ctx, scoped("alice", "k1"), p); err != nil {
			t.Fatal(err)
		}
		got, err := l.Get(ctx, "alice", "pay_1")
		if err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(p.CreatedAt) || got.CreatedAt.Location() != time.UTC {
			t.Errorf("CreatedAt = %v, want %v in UTC", got.CreatedAt, p.CreatedAt)
		}
	}},
	{"CreateWithATakenKeyReturnsTheOriginalPaymentAndErrExists", func(t *testing.T, l ledger.Ledger) {
		ctx := context.Background()
		first := payment("alice", "pay_1", 1250)
		if _, err := l.Create(ctx, scoped("alice", "k1"), first); err != nil {
			t.Fatal(err)
		}
		retry := payment("alice", "pay_2", 9999) // a retry after the cache record was lost
		got, err := l.Create(ctx, scoped("alice", "k1"), retry)
		if !errors.Is(err, ledger.ErrExists) || got != stored(first) {
			t.Fatalf("second Create = %+v, %v; want %+v, ErrExists", got, err, stored(first))
		}
		if _, err := l.Get(ctx, "alice", "pay_2"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Get of the retry's id = %v, want ErrNotFound: the retry must write nothing", err)
		}
	}},
	{"ConcurrentCreatesWithOneKeyCreateExactlyOnePayment", func(t *testing.T, l ledger.Ledger) {
		ctx := context.Background()
		const n = 24
		type result struct {
			p   ledger.Payment
			err error
		}
		results := make([]result, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				p, err := l.Create(ctx, scoped("alice", "k1"), payment("alice", fmt.Sprintf("pay_%d", i), int64(100+i)))
				results[i] = result{p, err}
			})
		}
		close(start)
		wg.Wait()

		var winners []ledger.Payment
		for i, r := range results {
			switch {
			case r.err == nil:
				winners = append(winners, r.p)
			case !errors.Is(r.err, ledger.ErrExists):
				t.Errorf("Create %d: %v, want nil or ErrExists", i, r.err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%d Creates succeeded, want exactly 1", len(winners))
		}
		winner := winners[0]
		for i, r := range results {
			if r.p != winner {
				t.Errorf("Create %d returned %+v, want the created payment %+v", i, r.p, winner)
			}
			id := fmt.Sprintf("pay_%d", i)
			if got, err := l.Get(ctx, "alice", id); id == winner.ID {
				if err != nil || got != winner {
					t.Errorf("Get(%s) = %+v, %v; want %+v", id, got, err, winner)
				}
			} else if !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("Get(%s) of a losing Create = %+v, %v; want ErrNotFound", id, got, err)
			}
		}
	}},
	{"OneKeyUsedByTwoPrincipalsMakesTwoPayments", func(t *testing.T, l ledger.Ledger) {
		ctx := context.Background()
		a, b := payment("alice", "pay_a", 100), payment("bob", "pay_b", 200)
		if _, err := l.Create(ctx, scoped("alice", "same-key"), a); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Create(ctx, scoped("bob", "same-key"), b); err != nil || got != stored(b) {
			t.Fatalf("bob's Create = %+v, %v; want his own payment", got, err)
		}
		if got, err := l.Get(ctx, "alice", "pay_a"); err != nil || got != stored(a) {
			t.Errorf("alice's Get = %+v, %v", got, err)
		}
		if got, err := l.Get(ctx, "bob", "pay_b"); err != nil || got != stored(b) {
			t.Errorf("bob's Get = %+v, %v", got, err)
		}
	}},
	{"GetByAnotherPrincipalIsNotFound", func(t *testing.T, l ledger.Ledger) {
		ctx := context.Background()
		if _, err := l.Create(ctx, scoped("alice", "k1"), payment("alice", "pay_1", 100)); err != nil {
			t.Fatal(err)
		}
		for _, principal := range []string{"bob", "", "ALICE"} {
			if got, err := l.Get(ctx, principal, "pay_1"); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("Get by %q = %+v, %v; want ErrNotFound", principal, got, err)
			}
		}
	}},
	{"GetOfAnUnknownIDIsNotFound", func(t *testing.T, l ledger.Ledger) {
		for _, id := range []string{"pay_missing", "", strings.Repeat("x", 3000)} {
			if got, err := l.Get(context.Background(), "alice", id); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("Get(%.20q) = %+v, %v; want ErrNotFound", id, got, err)
			}
		}
	}},
	{"CreateWithAnIDUsedUnderAnotherKeyIsRejectedAndLeavesTheKeyFree", func(t *testing.T, l ledger.Ledger) {
		ctx := context.Background()
		first := payment("alice", "pay_1", 100)
		if _, err := l.Create(ctx, scoped("alice", "k1"), first); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Create(ctx, scoped("alice", "k2"), payment("alice", "pay_1", 200)); !errors.Is(err, ledger.ErrDuplicateID) {
			t.Fatalf("Create reusing an id = %v, want ErrDuplicateID", err)
		}
		if got, err := l.Get(ctx, "alice", "pay_1"); err != nil || got != stored(first) {
			t.Errorf("Get after the rejected Create = %+v, %v; want the first payment", got, err)
		}
		second := payment("alice", "pay_2", 200)
		if got, err := l.Create(ctx, scoped("alice", "k2"), second); err != nil || got != stored(second) {
			t.Errorf("Create under the freed key = %+v, %v; want a new payment", got, err)
		}
	}},
	{"CreateRejectsAMissingKeyIDOrPrincipal", func(t *testing.T, l ledger.Ledger) {
		ctx := context.Background()
		for _, c := range []struct {
			name string
			key  string
			p    ledger.Payment
		}{
			{"no key", "", payment("alice", "pay_1", 1)},
			{"key over MaxKeyLen", strings.Repeat("k", ledger.MaxKeyLen+1), payment("alice", "pay_1", 1)},
			{"no id", "k", payment("alice", "", 1)},
			{"no principal", "k", payment("", "pay_1", 1)},
		} {
			if _, err := l.Create(ctx, c.key, c.p); err == nil || errors.Is(err, ledger.ErrExists) {
				t.Errorf("%s: Create = %v, want a validation error", c.name, err)
			}
		}
		if _, err := l.Get(ctx, "alice", "pay_1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a rejected Create wrote a payment: Get = %v", err)
		}
	}},
}

// runContract runs every contract case on a fresh ledger from newLedger.
func runContract(t *testing.T, newLedger func(t *testing.T) ledger.Ledger) {
	for _, c := range contract {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newLedger(t))
		})
	}
}

func TestMemoryKeepsTheLedgerContract(t *testing.T) {
	runContract(t, func(*testing.T) ledger.Ledger { return ledger.NewMemory() })
}

func TestPaymentJSONHasOnlyThePublicFields(t *testing.T) {
	b, err := json.Marshal(stored(payment("alice", "pay_1", 1250)))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"pay_1","amount":1250,"currency":"EUR","status":"succeeded","created_at":"2026-03-04T04:06:07.123456789Z"}`
	if string(b) != want {
		t.Errorf("JSON = %s\nwant   %s", b, want)
	}
}

func TestMemoryHonoursACanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := ledger.NewMemory()
	if _, err := l.Create(ctx, "k", payment("alice", "pay_1", 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Create = %v, want context.Canceled", err)
	}
	if _, err := l.Get(ctx, "alice", "pay_1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get = %v, want context.Canceled", err)
	}
}
