// Package lambdafn is the one skeleton of the functions' main packages: build the handler from
// the environment (its first Redis connection made during init), prime it within the warm-up
// bound, serve with lambda.Start, and close it. A bad setting fails init with one JSON line
// naming the variable, then exit status 1, so Lambda reports the failed init and never routes
// an invocation to a function that would run on unsafe settings.
package lambdafn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/setting"
)

// Handler is what a function's handler package builds for main.
type Handler[Ev, Resp any] interface {
	// Handle serves one event; it is what lambda.Start runs.
	Handle(ctx context.Context, ev Ev) (Resp, error)
	// Prime readies the handler for its first event (scripts compiled, code paths run once),
	// within ctx's deadline; an error leaves the first event to meet Redis's state itself.
	Prime(ctx context.Context) error
	// Close releases what the handler opened (its Redis connection).
	Close() error
}

// Build builds a function's handler from getenv. opts make its first Redis connection during
// init (redisconn.WithWarmUp): pass them to the handler's own Redis options.
type Build[H Handler[Ev, Resp], Ev, Resp any] func(ctx context.Context, getenv func(string) string, opts ...redisconn.Option) (H, error)

// Main runs the function build makes as this process's Lambda function, and does not return.
// attrs name the function in its init lines (function, and the webhook's provider).
func Main[H Handler[Ev, Resp], Ev, Resp any](attrs []slog.Attr, build Build[H, Ev, Resp]) {
	os.Exit(Run(attrs, build, os.Getenv, os.Stdout, func(h func(context.Context, Ev) (Resp, error)) { lambda.Start(h) }))
}

// Run is Main with its environment, its output and its runtime loop given, and returns the exit
// status: 1 after an init failure, once its line is written; 0 once start returned (in Lambda
// it never does) and the handler was closed.
//
// The first connection (TCP, TLS, AUTH or IAM token) is made while build runs, and the handler
// is then primed; both within one bound, redisconn.DefaultWarmUp, so that a Redis that is down
// never holds or fails init.
func Run[H Handler[Ev, Resp], Ev, Resp any](attrs []slog.Attr, build Build[H, Ev, Resp], getenv func(string) string,
	out io.Writer, start func(func(context.Context, Ev) (Resp, error))) int {
	logger := slog.New(slog.NewJSONHandler(out, nil)).With(anyAttrs(attrs)...)
	// go-redis's own notices (pool, reconnects) as JSON lines too: one object per log line.
	redisconn.UseSlog(logger)
	warmUntil := time.Now().Add(redisconn.DefaultWarmUp)
	h, err := build(context.Background(), getenv, redisconn.WithWarmUp(redisconn.DefaultWarmUp))
	if err != nil {
		logInitFailure(logger, err)
		return 1
	}
	ctx, cancel := context.WithDeadline(context.Background(), warmUntil)
	_ = h.Prime(ctx) // on error the first event meets Redis's state itself, as without Prime
	cancel()
	start(h.Handle)
	if err := h.Close(); err != nil {
		logger.Warn("close failed", slog.String("error", err.Error()))
	}
	return 0
}

// logInitFailure writes the one JSON line that explains a failed init, with the variable at
// fault as its own attribute when the error names one.
func logInitFailure(logger *slog.Logger, err error) {
	var attrs []any
	var se *setting.Error
	if errors.As(err, &se) {
		attrs = append(attrs, slog.String("variable", se.Var))
	}
	logger.Error("init failed", append(attrs, slog.String("error", err.Error()))...)
}

func anyAttrs(attrs []slog.Attr) []any {
	out := make([]any, len(attrs))
	for i, a := range attrs {
		out[i] = a
	}
	return out
}
