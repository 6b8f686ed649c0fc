package handler

import (
	"context"
	"fmt"

	"github.com/idemlambda/idem/internal/redisguard"
)

// Prime readies the handler for its first delivery, for a function's init, once New has made the
// connection (redisconn.WithWarmUp): the server compiles the guard's scripts (idem.Guard.Warm),
// so the first completion sends only their SHA. The delivery path itself is not
// run: its work forwards the event to the sink (a queue, an event bus), which a synthetic event
// must not reach.
//
// Bound it with ctx (the function's init gives it what is left of redisconn.DefaultWarmUp); on
// error the first delivery sends the scripts' source, as without Prime.
func (h *Handler) Prime(ctx context.Context) error {
	err := h.guard.Warm(ctx)
	redisguard.LogInit(ctx, h.logger, h.guard, err) // the init line, with the eviction policy
	if err != nil {
		return fmt.Errorf("webhook: prime: %w", err)
	}
	return nil
}
