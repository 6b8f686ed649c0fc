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
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/setting"
)

func main() {
	// go-redis's own notices (pool, reconnects) as JSON lines too: one object per log line.
	redisconn.UseSlog(slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", handler.Function(os.Getenv)))
	// The first connection (TCP, TLS, AUTH or IAM token) is made here, during init, rather than
	// on the first request, and then one synthetic payment runs the request's code once (see
	// Handler.Prime); both within one bound, so a Redis that is down never holds or fails init.
	warmUntil := time.Now().Add(redisconn.DefaultWarmUp)
	h, err := handler.New(context.Background(), os.Getenv,
		handler.WithRedisOptions(redisconn.WithWarmUp(redisconn.DefaultWarmUp)))
	if err != nil {
		logInitFailure(os.Stdout, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithDeadline(context.Background(), warmUntil)
	_ = h.Prime(ctx) // on error the first request meets Redis's state itself, as without Prime
	cancel()
	lambda.Start(h.Handle)
}

// logInitFailure writes the one JSON line that explains a failed init, with the variable at
// fault as its own attribute when the error names one.
func logInitFailure(w io.Writer, err error) {
	attrs := []any{slog.String("function", handler.Function(os.Getenv))}
	var se *setting.Error
	if errors.As(err, &se) {
		attrs = append(attrs, slog.String("variable", se.Var))
	}
	attrs = append(attrs, slog.String("error", err.Error()))
	slog.New(slog.NewJSONHandler(w, nil)).Error("init failed", attrs...)
}
