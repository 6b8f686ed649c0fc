// Command payments is the payments API Lambda function: POST /payments and GET /payments/{id}
// behind an API Gateway HTTP API (payload v2.0). Everything is built once, at init, from the
// environment (see handler.New); a bad setting fails init with one log line naming the variable.
//
// Build the bootstrap for provided.al2023 on arm64 with:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./functions/payments
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/lambdafn"
	"github.com/idemlambda/idem/internal/redisconn"
)

func main() {
	lambdafn.Main([]slog.Attr{slog.String("function", handler.Function(os.Getenv))}, build)
}

// build is the handler of the function, from the environment; Prime then runs one synthetic
// payment through the request's code (see Handler.Prime).
func build(ctx context.Context, getenv func(string) string, opts ...redisconn.Option) (*handler.Handler, error) {
	return handler.New(ctx, getenv, handler.WithRedisOptions(opts...))
}
