package idem

import (
	"context"
	"errors"
)

// Order places one call among the events of one object (DoOrdered, Item.Order).
type Order struct {
	// Object names the object the event is about, within the key's Scope (Stripe's
	// data.object.id, a Shopify resource id). Empty: the call is not ordered.
	Object string
	// Version is the event's position in its object's history: larger is newer. An event time
	// in Unix seconds or milliseconds, or a sequence number; one object's events must all use
	// the same unit.
	Version int64
}

// DoOrdered is Do for an event of order.Object.
// TODO(ordering): the ordered claim and completion.
func (g *Guard) DoOrdered(ctx context.Context, key Key, order Order, fp Fingerprint, work Work) (Outcome, error) {
	if order.Object == "" {
		return g.Do(ctx, key, fp, work)
	}
	return Outcome{Kind: InvalidKey}, errors.New("idem: ordering is not built yet")
}
