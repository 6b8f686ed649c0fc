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
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/redisconn"
)

func main() {
	// go-redis's own notices (pool, reconnects) as JSON lines too: one object per log line.
	redisconn.UseSlog(slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", os.Getenv(handler.EnvFunctionName)))
	// The first connection (TCP, TLS, AUTH or IAM token) is made here, during init, rather than
	// on the first request, and then the server compiles the guard's scripts (Handler.Prime);
	// both within one bound, so a Redis that is down never holds or fails init.
	warmUntil := time.Now().Add(redisconn.DefaultWarmUp)
	h, err := handler.New(context.Background(), os.Getenv,
		handler.WithRedisOptions(redisconn.WithWarmUp(redisconn.DefaultWarmUp)))
	if err != nil {
		// One line naming the variable, then a non-zero exit: Lambda reports the init failure
		// and never routes an invocation to a function that would run on unsafe settings.
		slog.New(slog.NewJSONHandler(os.Stdout, nil)).Error("init failed",
			"function", os.Getenv(handler.EnvFunctionName),
			"provider", os.Getenv(handler.EnvProvider),
			"error", err.Error())
		os.Exit(1)
	}
	ctx, cancel := context.WithDeadline(context.Background(), warmUntil)
	_ = h.Prime(ctx) // on error the first delivery sends the scripts' source, as without Prime
	cancel()
	lambda.Start(h.Handle)
}
