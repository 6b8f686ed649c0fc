package redisguard

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/idemlambda/idem/pkg/idem"
)

// LogInit writes a function's init line once its guard is warm (idem.Guard.Warm): the store's
// maxmemory-policy as Warm read it ("unknown" when it could not), and, before it, a warning when
// that policy can evict claims or results, since then a late retry can run the work again and a
// claim can vanish under running work. warmErr is Warm's error, logged with the line.
func LogInit(ctx context.Context, logger *slog.Logger, g *idem.Guard, warmErr error) {
	policy, safe := g.EvictionPolicy()
	if policy != "" && !safe {
		logger.WarnContext(ctx, "the cache's maxmemory-policy can evict idempotency claims and results: "+
			"a retry after an eviction runs the work again; set maxmemory-policy noeviction "+
			"(IDEM_UNSAFE_EVICTION=refuse answers 503 until it is)", "eviction_policy", policy)
	}
	attrs := []any{"eviction_policy", cmp.Or(policy, "unknown")}
	if warmErr != nil {
		attrs = append(attrs, "warm_up_error", warmErr.Error())
	}
	logger.InfoContext(ctx, "init", attrs...)
}
