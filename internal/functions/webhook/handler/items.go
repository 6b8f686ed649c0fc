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

	sum := summarize(outs)
	if sum.worst >= 0 {
		resp, rec := respond(outs[sum.worst], errs[sum.worst], d)
		rec.ID, rec.RoundTrips = items[sum.worst].Key.ID, sum.trips
		return resp, rec
	}
	id := items[0].Key.ID
	if len(items) > 1 {
		id += " (+" + strconv.Itoa(len(items)-1) + " more)"
	}
	answer := d.Answer
	if answer == nil {
		answer = &webhook.Handshake{ContentType: "application/json", Body: []byte(`{"received":true}`)}
	}
	headers := map[string]string{"content-type": answer.ContentType}
	rec := obs.Request{Outcome: obs.OutcomeExecuted, ID: id, RoundTrips: sum.trips}
	if sum.executed == 0 {
		headers[idemhttp.HeaderReplayed] = "true"
		rec.Outcome = obs.OutcomeReplayed
	}
	if i := sum.notStored; i >= 0 {
		// An item forwarded whose result is not stored is logged as respond logs it.
		_, r := respond(outs[i], errs[i], d)
		rec.Outcome, rec.Reason, rec.Err = r.Outcome, r.Reason, fmt.Errorf("item %s: %w", items[i].Key.ID, r.Err)
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: headers, Body: string(answer.Body)}, rec
}

// itemsSummary is what the outcomes of a delivery's items add up to.
type itemsSummary struct {
	worst     int // the item whose refusal answers the delivery, or -1
	notStored int // an item forwarded whose result is not stored, or -1
	executed  int // the items forwarded now
	trips     int // the batch's round trips
}

// summarize adds up the items' outcomes.
func summarize(outs []idem.Outcome) itemsSummary {
	sum := itemsSummary{worst: -1, notStored: -1}
	for i, out := range outs {
		sum.trips = max(sum.trips, out.RoundTrips)
		switch out.Kind {
		case idem.NotStored, idem.LockLost:
			sum.notStored = i
			sum.executed++
		case idem.Executed, idem.ExecutedUnguarded:
			sum.executed++
		}
		if r := itemRank(out.Kind); r > 0 && (sum.worst < 0 || r > itemRank(outs[sum.worst].Kind)) {
			sum.worst = i
		}
	}
	return sum
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
