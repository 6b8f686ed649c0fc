// Package devapi is what `sam local start-api` does without Docker: it runs every function of
// the SAM template in-process behind a stand-in for the HTTP API (package gateway), with the
// routes, timeouts and environment of the template (package samtemplate), for `make run`, the
// tests and the sender. It stands in for what a machine without AWS lacks:
//
//   - one Redis client shared by every function: the one at REDIS_URL (with the other REDIS_*
//     variables), else an embedded miniredis whose TTLs run on the wall clock;
//   - webhook functions accept their provider's development secret (webhook.DevSecret); their
//     sink is the sqs sink on an in-process FIFO queue that feeds the consumer function, and
//     API.Payloads stands in for the payload bucket;
//   - the payments function uses the in-memory ledger, behind a stand-in for the authorizer
//     PAYMENTS_AUTH names, whose caller is HeaderPrincipal;
//   - variables that name AWS resources (secret ARNs, queue URL, event bus, bucket, table, cache)
//     are unset: their values in the template are known only after a deploy (samtemplate);
//   - the WEBHOOK_HMAC_* settings in the environment add a function for the hmac preset on
//     POST /webhooks/hmac.
//
// The process environment takes precedence over the template and these defaults, except for what
// defines a function: WEBHOOK_PROVIDER, the signing secret (WEBHOOK_SECRET, WEBHOOK_SECRET_ARN),
// AWS_LAMBDA_FUNCTION_NAME and AWS_LAMBDA_RUNTIME_API, never set, since this is not Lambda.
package devapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/embeddedredis"
	consumerhandler "github.com/idemlambda/idem/internal/functions/consumer/handler"
	paymentshandler "github.com/idemlambda/idem/internal/functions/payments/handler"
	webhookhandler "github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/gateway"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/webhook"
)

// Config says what to serve and where the output goes.
type Config struct {
	Template  string              // the SAM template's path; default template.yaml
	Providers string              // the webhook providers, as samtemplate.LoadProviders takes them
	Getenv    func(string) string // the process environment; default os.Getenv
	LogOutput io.Writer           // the functions' log lines; default os.Stdout, as in Lambda
	AccessLog io.Writer           // the gateway's line per request; default os.Stderr
	// Process is the consumer's work on each event; default consumerhandler.LogProcess.
	Process consumerhandler.Process
}

// API is the running development API. It is an http.Handler.
type API struct {
	// Template is the template served.
	Template *samtemplate.Template
	// Redis is the client every function shares.
	Redis *redisconn.Conn
	// Payloads stands in for the payload bucket: the webhook functions keep there the events
	// too large for one message, and the consumer reads them back.
	Payloads *sink.MemoryStore
	// Embedded is true when the functions share an embedded miniredis, REDIS_URL being unset.
	Embedded bool

	env     map[string]map[string]string // LocalEnv by function
	gateway *gateway.Gateway
	closers []func() error
}

// New opens the shared Redis client (starting the embedded Redis when REDIS_URL is unset) and
// builds every function's handler, as Lambda builds it at init. Nothing is dialled: a Redis
// that is down makes requests fail with 503, as in Lambda.
func New(ctx context.Context, cfg Config) (*API, error) {
	cfg.Template = cmp.Or(cfg.Template, "template.yaml")
	cfg.LogOutput, cfg.AccessLog = cmp.Or[io.Writer](cfg.LogOutput, os.Stdout), cmp.Or[io.Writer](cfg.AccessLog, os.Stderr)
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	t, err := samtemplate.LoadProviders(cfg.Template, cfg.Providers)
	if err != nil {
		return nil, fmt.Errorf("devapi: %w", err)
	}
	addHMACFunction(t, cfg.Getenv)
	a := &API{Template: t, Payloads: sink.NewMemoryStore("local-payloads"), env: map[string]map[string]string{}}
	if err := a.build(ctx, cfg); err != nil {
		_ = a.Close()
		return nil, fmt.Errorf("devapi: %w", err)
	}
	return a, nil
}

// build opens the Redis client and builds the handlers and the gateway.
func (a *API) build(ctx context.Context, cfg Config) error {
	if err := a.openRedis(ctx, cfg.Getenv); err != nil {
		return err
	}
	// The in-process queue of the sqs sink, when the template has a consumer function to feed.
	var queue *localQueue
	if slices.ContainsFunc(a.Template.Functions, func(f samtemplate.Function) bool { return f.Code == samtemplate.Consumer }) {
		queue = &localQueue{log: cfg.AccessLog}
	}
	var functions []gateway.Function
	for _, f := range a.Template.Functions {
		local, fixed := localEnv(f)
		getenv := func(name string) string {
			if v, ok := fixed[name]; ok {
				return v
			}
			return cmp.Or(cfg.Getenv(name), local[name])
		}
		var h gateway.Handler
		switch f.Code {
		case samtemplate.Consumer:
			opts := []consumerhandler.Option{consumerhandler.WithRedis(a.Redis.Client), consumerhandler.WithLogOutput(cfg.LogOutput),
				consumerhandler.WithPayloadStore(a.Payloads)}
			if cfg.Process != nil {
				opts = append(opts, consumerhandler.WithProcess(cfg.Process))
			}
			ch, err := consumerhandler.New(ctx, getenv, opts...)
			if err != nil {
				return fmt.Errorf("%s: %w", f.LogicalID, err)
			}
			queue.consume, queue.timeout = ch.HandleSQS, f.Timeout
			a.closers = append(a.closers, ch.Close, queue.Close)
		case samtemplate.Webhook:
			var opts []webhookhandler.Option
			if queue != nil && cfg.Getenv(sink.EnvSink) == "" {
				local[sink.EnvSink] = "sqs"
				opts = append(opts, webhookhandler.WithSink(sink.NewSQS(queue, localQueueURL, sink.WithPayloadStore(a.Payloads))))
			}
			wh, err := webhookhandler.New(ctx, getenv, append(opts, webhookhandler.WithRedis(a.Redis.Client), webhookhandler.WithLogOutput(cfg.LogOutput))...)
			if err != nil {
				return fmt.Errorf("%s: %w", f.LogicalID, err)
			}
			a.closers = append(a.closers, wh.Close)
			h = func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				defer queue.release() // what the invocation sent goes to the consumer once it returned
				return wh.Handle(ctx, req)
			}
		case samtemplate.Payments:
			ph, err := paymentshandler.New(ctx, getenv, paymentshandler.WithRedis(a.Redis.Client), paymentshandler.WithLogOutput(cfg.LogOutput))
			if err != nil {
				return fmt.Errorf("%s: %w", f.LogicalID, err)
			}
			a.closers = append(a.closers, ph.Close)
			h = emulateAuthorizer(getenv(paymentshandler.EnvAuth), ph.Handle)
		}
		maps.Copy(local, fixed)
		a.env[f.LogicalID] = local
		if h != nil {
			functions = append(functions, gateway.Function{Function: f, Handler: h})
		}
	}
	var err error
	a.gateway, err = gateway.New(functions, cfg.AccessLog)
	return err
}

// localEnv returns the local defaults of f (the template's static variables, and the local sink
// and ledger) and the variables that the process environment cannot change.
func localEnv(f samtemplate.Function) (local, fixed map[string]string) {
	local = maps.Clone(f.Env)
	// This process is not a Lambda runtime, whatever its environment says.
	fixed = map[string]string{redisconn.EnvRuntimeAPI: "", webhookhandler.EnvFunctionName: f.LogicalID}
	switch f.Code {
	case samtemplate.Webhook:
		provider := f.Env[webhookhandler.EnvProvider]
		local[sink.EnvSink] = "log"
		fixed[webhookhandler.EnvProvider] = provider
		fixed[webhookhandler.EnvSecret] = webhook.DevSecret(provider)
		fixed[webhookhandler.EnvSecretARN] = ""
	case samtemplate.Payments:
		local[paymentshandler.EnvLedger] = paymentshandler.LedgerMemory
	}
	return local, fixed
}

// addHMACFunction adds a webhook function for the configurable HMAC preset on POST
// /webhooks/hmac, with the settings of the process environment, when that describes one
// (config.HMACHeaderSetting is set) and the template has no such function. The template
// deploys named presets; a local run is where the settings of another sender are tried. The
// function is a copy of the template's first webhook function with WEBHOOK_PROVIDER=hmac.
func addHMACFunction(t *samtemplate.Template, getenv func(string) string) {
	i := slices.IndexFunc(t.Functions, func(f samtemplate.Function) bool { return f.Code == samtemplate.Webhook && len(f.Routes) > 0 })
	if _, ok := t.WebhookFunction(config.HMACProvider); ok || i < 0 || strings.TrimSpace(getenv(config.HMACHeaderSetting)) == "" {
		return
	}
	f := t.Functions[i]
	f.LogicalID, f.Env = "WebhookHmacFunction", maps.Clone(f.Env)
	f.Env[webhookhandler.EnvProvider] = config.HMACProvider
	f.Routes = []samtemplate.Route{{Method: f.Routes[0].Method, Path: "/webhooks/" + config.HMACProvider, Function: f.LogicalID}}
	t.Functions = append(t.Functions, f)
	slices.SortFunc(t.Functions, func(a, b samtemplate.Function) int { return strings.Compare(a.LogicalID, b.LogicalID) })
}

// openRedis builds the shared client through redisconn.Open, so the functions get the client
// settings they have in Lambda: for REDIS_URL and the other REDIS_* variables, or for an
// embedded miniredis started here when REDIS_URL is unset.
func (a *API) openRedis(ctx context.Context, getenv func(string) string) error {
	settings := redisconn.Settings{}
	if strings.TrimSpace(getenv(redisconn.EnvURL)) != "" {
		var err error
		if settings, err = redisconn.SettingsFromEnv(getenv); err != nil {
			return err
		}
	} else {
		// Its TTLs run on the wall clock, else no record of a local run would ever expire.
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		if err := m.Start(); err != nil {
			return fmt.Errorf("start the embedded Redis: %w", err)
		}
		embeddedredis.RunShebangScripts(m)
		a.Embedded, settings.URL = true, "redis://"+m.Addr()
		a.closers = append(a.closers, func() error { m.Close(); return nil })
	}
	conn, err := redisconn.Open(ctx, settings)
	if err != nil {
		return err
	}
	a.Redis = conn
	a.closers = append(a.closers, conn.Close)
	return nil
}

// ServeHTTP serves one request as API Gateway would, by invoking the route's function, and
// samtemplate.RoutesPath.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == samtemplate.RoutesPath && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(samtemplate.Served{Providers: a.Providers()})
		return
	}
	a.gateway.ServeHTTP(w, r)
}

// LocalEnv returns the environment the template and the local defaults give the function called
// logicalID (the process environment still takes precedence where allowed).
func (a *API) LocalEnv(logicalID string) map[string]string { return a.env[logicalID] }

// Providers returns the webhook providers served, sorted.
func (a *API) Providers() []string {
	var out []string
	for _, f := range a.Template.Functions {
		if f.Code == samtemplate.Webhook {
			out = append(out, f.Env[webhookhandler.EnvProvider])
		}
	}
	slices.Sort(out)
	return out
}

// Close closes the handlers and the shared Redis client, then stops the embedded Redis, if
// any. It returns the errors joined.
func (a *API) Close() error {
	var errs []error
	for _, c := range slices.Backward(a.closers) {
		errs = append(errs, c())
	}
	a.closers = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("devapi: close: %w", err)
	}
	return nil
}
