package idem

import (
	"context"
	"errors"
	"testing"
)

// An older event after a newer one completed is Superseded, in one round trip, and stays so on
// retry; equal and newer versions run; a newer failure supersedes nothing.
//
//cyclo:one check per step of the object's history, each failing with its outcome
func TestOrderedOlderEventAfterANewerCompletedIsSuperseded(t *testing.T) {
	b := miniredisBackend(t)
	g := b.guard(t, b.newClient(t))
	ctx := context.Background()
	fp := FingerprintOf([]byte("p"))
	do := func(id string, v int64, work Work) (Outcome, error) {
		return g.DoOrdered(ctx, Key{Scope: "s", ID: id}, Order{Object: "cus_1", Version: v}, fp, work)
	}
	if out, err := do("e10", 10, failWork); out.Kind != Failed {
		t.Fatalf("failing newer event: %v %v", out.Kind, err)
	}
	if out, err := do("e5", 5, okWork("5")); out.Kind != Executed || out.RoundTrips != 2 {
		t.Fatalf("older event after a failed newer one: %v %v in %d", out.Kind, err, out.RoundTrips)
	}
	if out, err := do("e7", 7, okWork("7")); out.Kind != Executed {
		t.Fatalf("newer: %v %v", out.Kind, err)
	}
	if out, err := do("e7b", 7, okWork("7b")); out.Kind != Executed {
		t.Fatalf("tie: %v %v", out.Kind, err)
	}
	for range 2 {
		out, err := do("e6", 6, okWork("6"))
		if out.Kind != Superseded || !errors.Is(err, ErrSuperseded) || out.SupersededBy != 7 || out.RoundTrips != 1 {
			t.Fatalf("older: %v %v by %d in %d", out.Kind, err, out.SupersededBy, out.RoundTrips)
		}
		checkVocabulary(t, "DoOrdered, superseded", Superseded, err)
	}
	if out, _ := do("e5", 5, okWork("5")); out.Kind != Replayed {
		t.Fatalf("completed older event replays: %v", out.Kind)
	}
	outs, errs := g.DoBatch(ctx, []Item{
		{Key: Key{Scope: "s", ID: "b1"}, Fingerprint: fp, Work: okWork("b1"), Order: Order{Object: "cus_1", Version: 3}},
		{Key: Key{Scope: "s", ID: "b2"}, Fingerprint: fp, Work: okWork("b2"), Order: Order{Object: "cus_2", Version: 3}},
		{Key: Key{Scope: "s", ID: "b3"}, Fingerprint: fp, Work: okWork("b3")},
	}, nil)
	if outs[0].Kind != Superseded || outs[1].Kind != Executed || outs[2].Kind != Executed || outs[1].RoundTrips != 2 {
		t.Fatalf("batch: %v %v %v %v, %d round trips", outs[0].Kind, outs[1].Kind, outs[2].Kind, errs, outs[1].RoundTrips)
	}
}
