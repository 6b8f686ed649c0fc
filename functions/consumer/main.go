// Command consumer is the Lambda function that consumes the events the webhook functions
// forward: the messages of the sqs sink's FIFO queue (an SQS event source with
// FunctionResponseTypes: [ReportBatchItemFailures]), or the entries of the eventbridge sink's
// bus when a rule targets it. Each event runs process exactly once. Build it for
// provided.al2023 with
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./functions/consumer
//
// Everything is built once, at init, before the first invocation; package handler documents
// the settings and the log lines.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/lambdafn"
	"github.com/idemlambda/idem/internal/redisconn"
)

// process is the work done once per forwarded event: replace it with your own (an error makes
// SQS deliver the event again). nil keeps the default, handler.LogProcess: one JSON line per
// event.
var process handler.Process

func main() {
	lambdafn.Main([]slog.Attr{slog.String("function", os.Getenv(handler.EnvFunctionName))}, build)
}

// build is the handler of the function, from the environment; Prime then has the server
// compile the guard's scripts.
func build(ctx context.Context, getenv func(string) string, opts ...redisconn.Option) (*handler.Handler, error) {
	hopts := []handler.Option{handler.WithRedisOptions(opts...)}
	if process != nil {
		hopts = append(hopts, handler.WithProcess(process))
	}
	return handler.New(ctx, getenv, hopts...)
}
