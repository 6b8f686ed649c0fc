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
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/redisconn"
)

// process is the work done once per forwarded event: replace it with your own (an error makes
// SQS deliver the event again). nil keeps the default, handler.LogProcess: one JSON line per
// event.
var process handler.Process

func main() {
	// go-redis's own notices (pool, reconnects) as JSON lines too: one object per log line.
	redisconn.UseSlog(slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", os.Getenv(handler.EnvFunctionName)))
	opts := []handler.Option{handler.WithRedisOptions(redisconn.WithWarmUp(redisconn.DefaultWarmUp))}
	if process != nil {
		opts = append(opts, handler.WithProcess(process))
	}
	// The first connection (TCP, TLS, AUTH or IAM token) is made here, during init, rather than
	// on the first batch, and then the server compiles the guard's scripts (Handler.Prime);
	// both within one bound, so a Redis that is down never holds or fails init.
	warmUntil := time.Now().Add(redisconn.DefaultWarmUp)
	h, err := handler.New(context.Background(), os.Getenv, opts...)
	if err != nil {
		// One line naming the variable, then a non-zero exit: Lambda reports the init failure.
		slog.New(slog.NewJSONHandler(os.Stdout, nil)).Error("init failed",
			"function", os.Getenv(handler.EnvFunctionName), "error", err.Error())
		os.Exit(1)
	}
	ctx, cancel := context.WithDeadline(context.Background(), warmUntil)
	_ = h.Prime(ctx) // on error the first batch sends the scripts' source, as without Prime
	cancel()
	lambda.Start(h.Handle)
}
