package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/pkg/idem"
)

// pastDeadline is a context whose deadline has passed but which does not report it, as a
// context.WithDeadline of a process resumed after a pause does until its timer fires.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// fenceContract: the ledger reads the caller's fencing token from its context (idem.FenceFrom)
// and refuses a writer whose token is lower than the one the payment was written with.
var fenceContract = []struct {
	name string
	run  func(t *testing.T, l ledger.Ledger)
}{
	{"LowerTokenIsRefusedAndGetsNoPayment", func(t *testing.T, l ledger.Ledger) {
		key := scoped("alice", "k-fenced")
		later := idem.ContextWithFence(context.Background(), 20)
		first, err := l.Create(later, key, payment("alice", "pay_new_owner", 100))
		if err != nil || first.Fence != 20 {
			t.Fatalf("the later owner's Create = %+v, %v; want written with token 20", first, err)
		}
		stale := idem.ContextWithFence(context.Background(), 19)
		if p, err := l.Create(stale, key, payment("alice", "pay_paused_owner", 100)); !errors.Is(err, ledger.ErrFenced) || p.ID != "pay_new_owner" {
			t.Fatalf("stale owner's Create = %+v, %v; want ErrFenced and the later owner's payment", p, err)
		}
		if _, err := l.Get(context.Background(), "alice", "pay_paused_owner"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("the stale owner's payment was written: %v", err)
		}
	}},
	{"EqualOrHigherTokenFindsThePayment", func(t *testing.T, l ledger.Ledger) {
		key := scoped("alice", "k-retried")
		if _, err := l.Create(idem.ContextWithFence(context.Background(), 5), key, payment("alice", "pay_a", 1)); err != nil {
			t.Fatal(err)
		}
		for _, fence := range []uint64{5, 6} {
			p, err := l.Create(idem.ContextWithFence(context.Background(), fence), key, payment("alice", "pay_b", 1))
			if !errors.Is(err, ledger.ErrExists) || p.ID != "pay_a" {
				t.Fatalf("token %d: %+v, %v; want ErrExists with pay_a", fence, p, err)
			}
		}
		// A caller without a token keeps the old contract.
		if p, err := l.Create(context.Background(), key, payment("alice", "pay_c", 1)); !errors.Is(err, ledger.ErrExists) || p.ID != "pay_a" {
			t.Fatalf("no token: %+v, %v", p, err)
		}
	}},
	{"PastItsDeadlineNothingIsWritten", func(t *testing.T, l ledger.Ledger) {
		ctx := pastDeadline{context.Background()}
		if _, err := l.Create(ctx, scoped("alice", "k-late"), payment("alice", "pay_late", 1)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Create past the deadline = %v; want DeadlineExceeded", err)
		}
		if _, err := l.Get(context.Background(), "alice", "pay_late"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("a Create past its deadline wrote: %v", err)
		}
	}},
}

func runFenceContract(t *testing.T, newLedger func(t *testing.T) ledger.Ledger) {
	for _, c := range fenceContract {
		t.Run(c.name, func(t *testing.T) { c.run(t, newLedger(t)) })
	}
}

func TestMemoryIsFenced(t *testing.T) {
	runFenceContract(t, func(*testing.T) ledger.Ledger { return ledger.NewMemory() })
}

func TestDynamoDBIsFenced(t *testing.T) {
	client := dynalite(t)
	t.Run("WithTransactions", func(t *testing.T) {
		runFenceContract(t, func(t *testing.T) ledger.Ledger {
			return ledger.NewDynamoDB(&transacting{Client: client}, newTable(t, client))
		})
	})
	t.Run("WithoutTransactions", func(t *testing.T) {
		runFenceContract(t, func(t *testing.T) ledger.Ledger { return ledger.NewDynamoDB(client, newTable(t, client)) })
	})
}
