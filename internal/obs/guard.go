package obs

import (
	"log/slog"

	"github.com/idemlambda/idem/pkg/idem"
)

// GuardObserver returns the observer (idem.WithObserver) each function gives its guard: one warn
// line per call whose work ran, or had run, but whose result is not stored (lock_lost,
// not_stored: a retry may run the work again) or not replayable (not_replayable: retries get no
// result). The line names the outcome, the key's scope and KeyID, whether the work ran in this
// call, the claim's fencing token when there is one, and the guard's explanation.
func GuardObserver(l *slog.Logger) func(idem.Observation) {
	return func(o idem.Observation) {
		attrs := []any{
			slog.String("outcome", o.Outcome.Kind.String()),
			slog.String("scope", o.Key.Scope),
			slog.String("key_id", KeyID(o.Key.ID)),
			slog.Bool("ran", o.Outcome.Ran),
		}
		if o.Fence != 0 {
			attrs = append(attrs, slog.Uint64("fence", o.Fence))
		}
		if o.Err != nil {
			attrs = append(attrs, slog.String("error", o.Err.Error()))
		}
		l.Warn("idempotency: result not stored or not replayable", attrs...)
	}
}
