package idem

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
)

// sentinels is the package's error vocabulary, by the Kind each one names.
var sentinels = map[Kind]error{
	InProgress:  ErrInProgress,
	Mismatch:    ErrMismatch,
	InvalidKey:  ErrInvalidKey,
	Unavailable: ErrUnavailable,
	Superseded:  ErrSuperseded,
}

// checkVocabulary fails unless err matches the sentinel of kind, and only that one.
func checkVocabulary(t *testing.T, what string, kind Kind, err error) {
	t.Helper()
	for k, s := range sentinels {
		if got := errors.Is(err, s); got != (k == kind) {
			t.Errorf("%s: %s, error %v: errors.Is(err, %v) = %v", what, kind, err, s, got)
		}
	}
}

func TestDoAndDoBatchErrorsMatchTheSentinelOfTheirKind(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	g, err := New(m.NewClient(), WithLocalCache(10, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fp := FingerprintOf([]byte("a"))
	if _, err := g.Do(ctx, Key{Scope: "s", ID: "done"}, fp, okWork("x")); err != nil {
		t.Fatal(err)
	}
	hold, started := make(chan struct{}), make(chan struct{})
	go g.Do(ctx, Key{Scope: "s", ID: "held"}, fp, func(context.Context) (Result, error) {
		close(started)
		<-hold
		return Result{}, nil
	})
	<-started
	defer close(hold)

	cases := []struct {
		name string
		key  Key
		fp   Fingerprint
		want Kind
	}{
		{"invalid key", Key{Scope: "s"}, fp, InvalidKey},
		{"other payload (local cache)", Key{Scope: "s", ID: "done"}, FingerprintOf([]byte("b")), Mismatch},
		{"in progress", Key{Scope: "s", ID: "held"}, fp, InProgress},
	}
	for _, c := range cases {
		out, err := g.Do(ctx, c.key, c.fp, okWork("y"))
		if out.Kind != c.want {
			t.Fatalf("Do, %s: %s, want %s", c.name, out.Kind, c.want)
		}
		checkVocabulary(t, "Do, "+c.name, c.want, err)
	}
	// The same from the store, without the local cache.
	uncached, err := New(m.NewClient())
	if err != nil {
		t.Fatal(err)
	}
	out, err := uncached.Do(ctx, Key{Scope: "s", ID: "done"}, FingerprintOf([]byte("b")), okWork("y"))
	if out.Kind != Mismatch {
		t.Fatalf("Do, other payload: %s", out.Kind)
	}
	checkVocabulary(t, "Do, other payload (store)", Mismatch, err)

	items := make([]Item, len(cases))
	for i, c := range cases {
		items[i] = Item{Key: c.key, Fingerprint: c.fp, Work: okWork("y")}
	}
	outs, errs := uncached.DoBatch(ctx, items, nil)
	for i, c := range cases {
		if outs[i].Kind != c.want {
			t.Fatalf("DoBatch, %s: %s, want %s", c.name, outs[i].Kind, c.want)
		}
		checkVocabulary(t, "DoBatch, "+c.name, c.want, errs[i])
	}

	// A record this package did not write, then a store that is down.
	m.Set(Key{Scope: "s", ID: "corrupt"}.redisKey(defaultPrefix), "not a record")
	out, err = uncached.Do(ctx, Key{Scope: "s", ID: "corrupt"}, fp, okWork("y"))
	if out.Kind != Unavailable || !errors.Is(err, errCorruptRecord) {
		t.Fatalf("corrupt record: %s %v", out.Kind, err)
	}
	checkVocabulary(t, "Do, corrupt record", Unavailable, err)
	m.Close()
	out, err = uncached.Do(ctx, Key{Scope: "s", ID: "new"}, fp, okWork("y"))
	if out.Kind != Unavailable {
		t.Fatalf("store down: %s", out.Kind)
	}
	checkVocabulary(t, "Do, store down", Unavailable, err)
	outs, errs = uncached.DoBatch(ctx, []Item{{Key: Key{Scope: "s", ID: "new"}, Fingerprint: fp, Work: okWork("y")}}, nil)
	if outs[0].Kind != Unavailable {
		t.Fatalf("DoBatch, store down: %s", outs[0].Kind)
	}
	checkVocabulary(t, "DoBatch, store down", Unavailable, errs[0])
}

func TestWrapErrorsMatchTheSentinels(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	g, err := New(m.NewClient())
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
	go charge(ctx, order{ID: "held"})
	<-started
	defer close(hold)
	_, err = charge(ctx, order{ID: "held"})
	checkVocabulary(t, "Wrap, in progress", InProgress, err)
	if _, err := charge(ctx, order{ID: "o", Amount: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = charge(ctx, order{ID: "o", Amount: 2})
	checkVocabulary(t, "Wrap, other input", Mismatch, err)
	_, err = charge(ctx, order{ID: ""})
	checkVocabulary(t, "Wrap, empty key", InvalidKey, err)
	m.Close()
	_, err = charge(ctx, order{ID: "new"})
	checkVocabulary(t, "Wrap, store down", Unavailable, err)
}
