// Command webhook is the Lambda function that receives one provider's webhooks (chosen by
// WEBHOOK_PROVIDER) from API Gateway HTTP API and forwards each event to the sink exactly
// once. Build it for provided.al2023 with
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./functions/webhook
//
// Everything is built once, at init, before the first invocation; package handler documents
// the settings and the responses.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/lambdafn"
	"github.com/idemlambda/idem/internal/redisconn"
)

func main() {
	lambdafn.Main([]slog.Attr{
		slog.String("function", os.Getenv(handler.EnvFunctionName)),
		slog.String("provider", os.Getenv(handler.EnvProvider)),
	}, build)
}

// build is the handler of the function, from the environment; Prime then has the server
// compile the guard's scripts.
func build(ctx context.Context, getenv func(string) string, opts ...redisconn.Option) (*handler.Handler, error) {
	return handler.New(ctx, getenv, handler.WithRedisOptions(opts...))
}
