package handler

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/obs"
)

// maxPaymentIDLength is the longest payment id GET looks up.
const maxPaymentIDLength = 255

// get serves GET /payments/{id}: the payment, if it exists and belongs to principal. Another
// caller's payment is answered exactly like an unknown id, so ids reveal nothing.
func (h *Handler) get(ctx context.Context, _ events.APIGatewayV2HTTPRequest, id, principal string) (events.APIGatewayV2HTTPResponse, obs.Request) {
	if !validPaymentID(id) {
		return notFound(), rejected("not_found")
	}
	p, err := h.ledger.Get(ctx, principal, id)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		rec := rejected("not_found")
		rec.ID = id
		return notFound(), rec
	case err != nil:
		return apigw.Error(500, "internal_error", "the payment could not be read; retry"),
			obs.Request{ID: id, Outcome: obs.OutcomeError, Reason: "ledger_unavailable", Err: err}
	}
	return apigw.JSON(200, p), obs.Request{ID: id, Outcome: obs.OutcomeExecuted}
}

func notFound() events.APIGatewayV2HTTPResponse {
	return apigw.Error(404, "not_found", "no such payment")
}

// validPaymentID reports whether id can be a payment id: 1 to 255 characters from
// [A-Za-z0-9_-]. Anything else is not looked up.
func validPaymentID(id string) bool {
	if id == "" || len(id) > maxPaymentIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
