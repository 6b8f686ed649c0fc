package handler

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/redisguard"
)

// primeBody is the synthetic payment Prime creates: a valid request, as a client sends one.
const primeBody = `{"amount":100,"currency":"EUR","description":"init","metadata":{"order_id":"0"}}`

// Prime readies the handler for its first request, for a function's init. The connection to
// Redis is redisconn.WithWarmUp's part; what is left for a first request is code that has never
// run in this process (pages of the binary not yet loaded, encoders built on first use) and
// scripts the server has not compiled. Prime has the server compile the guard's scripts
// (idem.Guard.Warm), then sends one synthetic POST /payments through a copy of the handler
// whose payments stay in a throwaway in-memory ledger, whose log lines are dropped, and whose
// guard keeps the result for a millisecond, under a random idempotency key: nothing it writes
// outlives that millisecond, and no real key can meet it.
//
// Bound it with ctx (the function's init gives it what is left of redisconn.DefaultWarmUp): when
// Redis is unreachable it returns the error and the first request fails fast, as without Prime.
func (h *Handler) Prime(ctx context.Context) error {
	err := h.guard.Warm(ctx)
	redisguard.LogInit(ctx, h.logger, h.guard, err) // the init line, with the eviction policy
	if err != nil {
		return fmt.Errorf("payments: prime: %w", err)
	}
	p := *h
	p.guard, p.ledger, p.auth = h.prime, ledger.NewMemory(), AuthNone
	p.logger = slog.New(slog.DiscardHandler)
	p.routeLog = newRouteLoggers(p.logger)
	if p.createOnGuard, err = p.newCreate(h.prime); err != nil {
		return fmt.Errorf("payments: prime: %w", err)
	}
	resp, _ := p.Handle(ctx, events.APIGatewayV2HTTPRequest{
		RouteKey: RouteCreate,
		Headers:  map[string]string{"content-type": "application/json", HeaderIdempotencyKey: "prime-" + rand.Text()},
		Body:     primeBody,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: RouteCreate,
			HTTP:     events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/payments"},
		},
	})
	if resp.StatusCode != 201 {
		return fmt.Errorf("payments: prime: the synthetic payment answered %d: %s", resp.StatusCode, resp.Body)
	}
	return nil
}
