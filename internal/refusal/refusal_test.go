package refusal_test

import (
	"fmt"

	"github.com/idemlambda/idem/internal/refusal"
	"github.com/idemlambda/idem/pkg/idem"
)

// Of is the one table from the core's outcomes to HTTP answers.
func ExampleOf() {
	for _, k := range []idem.Kind{idem.InProgress, idem.Mismatch, idem.Unavailable, idem.InvalidKey, idem.Replayed} {
		r, ok := refusal.Of(k)
		fmt.Println(k, ok, r.Status, r.Code, r.Header())
	}
	// Output:
	// in_progress true 409 idempotency_key_in_use [retry-after 1]
	// mismatch true 422 idempotency_key_reused []
	// unavailable true 503 store_unavailable [retry-after 1]
	// invalid_key true 400 invalid_idempotency_key []
	// replayed false 0  []
}
