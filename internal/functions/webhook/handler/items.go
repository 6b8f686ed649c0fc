package handler

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/webhook"
)

// handleItems answers a verified delivery of several events (webhook.Delivery.Items, Adyen's
// notification items): each event is claimed under its own key and forwarded once, all of them
// through one DoBatch (2 round trips for the delivery, 1 when every item is a replay). The
// delivery is answered with the sender's acknowledgement (Delivery.Answer) when every item is
// forwarded or was before; otherwise with the refusal of the item the sender most needs to
// retry (see itemRank), so that the retry replays the items done and runs the others.
//
// Every item was verified before this point: a delivery with one bad item never gets here.
func (h *Handler) handleItems(ctx context.Context, d webhook.Delivery) (events.APIGatewayV2HTTPResponse, obs.Request) {
	received := h.now()
	items := make([]idem.Item, 0, len(d.Items))
	seen := make(map[string]idem.Fingerprint, len(d.Items))
	for _, it := range d.Items {
		fp := idem.Fingerprint(it.Fingerprint)
		// The same event twice in one delivery is one event; the same key with another
		// payload is left to the guard, which calls it a reuse.
		if prev, ok := seen[it.ID]; ok && prev == fp {
			continue
		}
		seen[it.ID] = fp
		item := it
		items = append(items, idem.Item{
			Key:         idem.Key{Scope: h.name, ID: it.ID},
			Fingerprint: fp,
			Work: func(ctx context.Context) (idem.Result, error) {
				return h.forward(ctx, item, received)
			},
		})
	}
	// A nil run forwards the claimed items one after another, in the delivery's order.
	outs, errs := h.guard.DoBatch(ctx, items, nil)

	worst, executed, replayed, trips := -1, 0, 0, 0
	for i, out := range outs {
		trips = max(trips, out.RoundTrips)
		switch out.Kind {
		case idem.Executed, idem.ExecutedUnguarded, idem.NotStored, idem.LockLost:
			executed++
		case idem.Replayed:
			replayed++
		}
		if itemRank(out.Kind) > 0 && (worst < 0 || itemRank(out.Kind) > itemRank(outs[worst].Kind)) {
			worst = i
		}
	}
	id := items[0].Key.ID
	if len(items) > 1 {
		id += " (+" + strconv.Itoa(len(items)-1) + " more)"
	}
	if worst >= 0 {
		resp, rec := respond(outs[worst], errs[worst])
		rec.ID, rec.RoundTrips = items[worst].Key.ID, trips
		return resp, rec
	}
	answer := d.Answer
	if answer == nil {
		answer = &webhook.Handshake{ContentType: "application/json", Body: []byte(`{"received":true}`)}
	}
	headers := map[string]string{"content-type": answer.ContentType}
	rec := obs.Request{Outcome: obs.OutcomeExecuted, ID: id, RoundTrips: trips}
	if executed == 0 && replayed > 0 {
		headers[idemhttp.HeaderReplayed] = "true"
		rec.Outcome = obs.OutcomeReplayed
	}
	for i, out := range outs {
		// An item forwarded whose result is not stored is logged as respond logs it.
		if out.Kind == idem.NotStored || out.Kind == idem.LockLost {
			_, r := respond(out, errs[i])
			rec.Outcome, rec.Reason, rec.Err = r.Outcome, r.Reason, fmt.Errorf("item %s: %w", items[i].Key.ID, r.Err)
			break
		}
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: headers, Body: string(answer.Body)}, rec
}

// itemRank orders the outcomes that refuse a delivery of several events, the one the sender
// most needs to retry highest: the store unavailable (503, all of it may be undone), the work
// failed (500), an item in progress (409), a reused id (422), a key unusable (400). Outcomes
// answered with 200 rank 0.
func itemRank(k idem.Kind) int {
	switch k {
	case idem.Unavailable:
		return 5
	case idem.Failed:
		return 4
	case idem.InProgress:
		return 3
	case idem.Mismatch:
		return 2
	case idem.InvalidKey:
		return 1
	}
	return 0
}
