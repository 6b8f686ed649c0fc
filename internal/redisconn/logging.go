package redisconn

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// UseSlog routes go-redis's own messages (connection pool and reconnection notices, which it
// prints as plain text by default) to logger, as WARN records with the message "redis client" and
// the text under "detail", so a function's log stays one JSON object per line. go-redis has one
// logger per process: call it once, at init, before the first command.
func UseSlog(logger *slog.Logger) { redis.SetLogger(slogLogger{logger}) }

// slogLogger adapts a *slog.Logger to go-redis's logger interface.
type slogLogger struct{ l *slog.Logger }

// Printf logs one go-redis message.
func (s slogLogger) Printf(ctx context.Context, format string, v ...any) {
	s.l.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
