// Package devapi runs every function of the SAM template in-process behind a local stand-in
// for the HTTP API (package gateway): the development API that `make run` serves, and that
// tests and the sender start in-process.
//
// Each function gets its own handler, built once as Lambda builds it at init, with the
// environment the template gives it (WEBHOOK_PROVIDER, IDEM_KEY_PREFIX, LOG_LEVEL, ...)
// adjusted for a machine without AWS:
//
//   - one Redis client, shared by every function and handed to each handler: the Redis at
//     REDIS_URL (with REDIS_CLUSTER and the other REDIS_* variables of the process
//     environment), or, when REDIS_URL is unset, an embedded miniredis that New starts in this
//     process, whose TTLs run on the wall clock, so records expire as in Redis. Only this
//     development API starts one: the functions' own code never does, so no deployed bootstrap
//     links a test server;
//   - webhook functions accept their provider's development secret (DevSecret), and any
//     secret Config.Secrets adds for the provider; their sink is the sqs sink sending to an
//     in-process FIFO queue that feeds the template's consumer function, as the queue's event
//     source does in AWS (sink log when the template has no consumer function); an event too
//     large for one message goes to an in-process payload store (API.Payloads) that stands in
//     for the S3 bucket of WEBHOOK_PAYLOAD_BUCKET, for the webhook functions and the consumer;
//   - the payments function uses the in-memory ledger, behind a stand-in for the authorizer that
//     PAYMENTS_AUTH names, which takes the caller from HeaderPrincipal (see emulateAuthorizer);
//   - variables that name AWS resources (secret ARNs, queue URL, event bus, payload bucket,
//     table) are unset;
//   - with WEBHOOK_HMAC_HEADER (and the other WEBHOOK_HMAC_* settings) in the process
//     environment, a webhook function for the hmac preset is added on POST /webhooks/hmac.
//
// Besides the template's routes it answers GET RoutesPath with the webhook providers served.
//
// Variables set in the process environment take precedence over the template and these local
// defaults (LOG_LEVEL=debug, IDEM_RESULT_TTL=1m, WEBHOOK_SINK=sqs with WEBHOOK_QUEUE_URL and
// AWS_ENDPOINT_URL_SQS, ...), except those that define a function: WEBHOOK_PROVIDER, the
// signing secret (WEBHOOK_SECRET, WEBHOOK_SECRET_ARN), AWS_LAMBDA_FUNCTION_NAME and
// AWS_LAMBDA_RUNTIME_API, which is never set, since this is not Lambda.
package devapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemlambda/idem/internal/config"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/aws/aws-lambda-go/events"

	consumerhandler "github.com/idemlambda/idem/internal/functions/consumer/handler"
	paymentshandler "github.com/idemlambda/idem/internal/functions/payments/handler"
	webhookhandler "github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/gateway"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/webhook"
)

// DefaultTemplate is the template served when Config.Template is empty.
const DefaultTemplate = "template.yaml"

// The template's choice of webhook providers: the functions a deploy creates are those of the
// keys listed in ProvidersParameter, each a key of the ProvidersMapping mapping.
const (
	// ProvidersParameter is the template parameter listing the webhook providers to deploy.
	ProvidersParameter = "WebhookProviders"
	// ProvidersMapping is the template mapping with one row per provider that can be deployed.
	ProvidersMapping = "WebhookProvider"
	// AllProviders, as the value of ProvidersParameter in Config.Parameters, stands for every
	// key of ProvidersMapping: every provider the template can deploy.
	AllProviders = "all"
)

// DevSecret returns the development signing secret of a webhook provider, the one the local
// API's webhook functions accept.
func DevSecret(provider string) string { return webhook.DevSecret(provider) }

// Config says what to serve and where the output goes.
type Config struct {
	// Template is the SAM template's path. Default DefaultTemplate.
	Template string
	// Parameters are values for the template's parameters, as `sam deploy
	// --parameter-overrides` would give them; the others take their defaults. Nil serves what a
	// deploy with every default creates. Parameters[ProvidersParameter] chooses the webhook
	// functions (AllProviders: every provider the template can deploy).
	Parameters map[string]string
	// Getenv reads the process environment. Default os.Getenv.
	Getenv func(string) string
	// LogOutput receives the functions' log lines (one JSON line per request, and the log
	// sink's event lines). Default os.Stdout, as in Lambda.
	LogOutput io.Writer
	// AccessLog receives the gateway's line per request. Default os.Stderr; io.Discard
	// silences it.
	AccessLog io.Writer
	// Secrets are signing secrets a provider's function accepts besides its development
	// secret, keyed by provider: the whsec_ secret `stripe listen` prints, for example.
	Secrets map[string][]string
	// Process is the consumer function's work on each forwarded event. Default
	// consumerhandler.LogProcess: one log line per event.
	Process consumerhandler.Process
}

// Function is one function of the template as the local API runs it.
type Function struct {
	samtemplate.Function
	// LocalEnv is the environment the template and the local defaults give the function
	// (variables of the process environment still take precedence where allowed).
	LocalEnv map[string]string
}

// API is the running development API. It is an http.Handler.
type API struct {
	// Template is the template served.
	Template *samtemplate.Template
	// Functions are the template's functions, as run here.
	Functions []Function
	// Redis is the client every function shares.
	Redis *redisconn.Conn
	// Payloads stands in for the payload bucket: the webhook functions keep there the events
	// too large for one message, and the consumer reads them back.
	Payloads *sink.MemoryStore

	embedded *miniredis.Miniredis // nil with REDIS_URL
	gateway  *gateway.Gateway
	closers  []func() error
}

// localPayloadBucket is the Bucket of the in-process payload store.
const localPayloadBucket = "local-payloads"

// deployOnly are variables that name AWS resources, or configure the Redis client that is
// replaced by the shared one: a local run never takes them from the template.
var deployOnly = []string{
	webhookhandler.EnvSecretARN, "WEBHOOK_QUEUE_URL", "WEBHOOK_EVENT_BUS", sink.EnvPayloadBucket, paymentshandler.EnvTable,
	redisconn.EnvURL, redisconn.EnvCluster, redisconn.EnvAuthSecretARN, redisconn.EnvIAMAuth,
	redisconn.EnvCacheName, redisconn.EnvServerless,
}

// New opens the shared Redis client (starting the embedded Redis when REDIS_URL is unset) and
// builds every function's handler. Nothing is dialled: a Redis that is down makes requests
// fail with 503, as in Lambda.
func New(ctx context.Context, cfg Config) (*API, error) {
	if cfg.Template == "" {
		cfg.Template = DefaultTemplate
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.LogOutput == nil {
		cfg.LogOutput = os.Stdout
	}
	if cfg.AccessLog == nil {
		cfg.AccessLog = os.Stderr
	}
	params, err := ResolveParameters(cfg.Template, cfg.Parameters)
	if err != nil {
		return nil, err
	}
	t, err := samtemplate.LoadWithParameters(cfg.Template, params)
	if err != nil {
		return nil, fmt.Errorf("devapi: %w", err)
	}
	addHMACFunction(t, cfg.Getenv)
	a := &API{Template: t, Payloads: sink.NewMemoryStore(localPayloadBucket)}

	if err := a.openRedis(ctx, cfg.Getenv); err != nil {
		return nil, err
	}

	var functions []gateway.Function
	for provider := range cfg.Secrets {
		if _, ok := t.WebhookFunction(provider); !ok {
			return nil, fmt.Errorf("devapi: a secret is given for %q, which no webhook function of %s serves", provider, t.Path)
		}
	}
	// The embedded Redis cannot compile the scripts' shebang line: send them without it.
	if a.Embedded() {
		a.Redis.Client.AddHook(&scriptFlags{})
	}
	queue, err := a.startConsumer(ctx, t, cfg)
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	for _, f := range t.Functions {
		local, fixed := localEnv(f, cfg.Secrets)
		getenv := envOf(cfg, local, fixed)
		var h gateway.Handler
		switch f.Code {
		case samtemplate.Webhook:
			opts := []webhookhandler.Option{webhookhandler.WithRedis(a.Redis.Client), webhookhandler.WithLogOutput(cfg.LogOutput)}
			if queue != nil && cfg.Getenv(sink.EnvSink) == "" {
				local[sink.EnvSink] = "sqs"
				opts = append(opts, webhookhandler.WithSink(sink.NewSQS(queue, localQueueURL, sink.WithPayloadStore(a.Payloads))))
			}
			wh, err := webhookhandler.New(ctx, getenv, opts...)
			if err != nil {
				_ = a.Close()
				return nil, fmt.Errorf("devapi: %s: %w", f.LogicalID, err)
			}
			a.closers = append(a.closers, wh.Close)
			h = wh.Handle
			if local[sink.EnvSink] == "sqs" && queue != nil {
				h = func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					defer queue.release()
					return wh.Handle(ctx, req)
				}
			}
		case samtemplate.Consumer:
			// Started by startConsumer; invoked by the local queue, not by a route.
		case samtemplate.Payments:
			ph, err := paymentshandler.New(ctx, getenv,
				paymentshandler.WithRedis(a.Redis.Client), paymentshandler.WithLogOutput(cfg.LogOutput))
			if err != nil {
				_ = a.Close()
				return nil, fmt.Errorf("devapi: %s: %w", f.LogicalID, err)
			}
			a.closers = append(a.closers, ph.Close)
			h = emulateAuthorizer(getenv(paymentshandler.EnvAuth), ph.Handle)
		default:
			_ = a.Close()
			return nil, fmt.Errorf("devapi: %s: no handler for code %q", f.LogicalID, f.Code)
		}
		maps.Copy(local, fixed)
		delete(local, redisconn.EnvRuntimeAPI)
		a.Functions = append(a.Functions, Function{Function: f, LocalEnv: local})
		if h != nil {
			functions = append(functions, gateway.Function{Name: f.LogicalID, Timeout: f.Timeout, Handler: h})
		}
	}
	if a.gateway, err = gateway.New(t.Routes(), functions, gateway.WithLog(cfg.AccessLog)); err != nil {
		_ = a.Close()
		return nil, fmt.Errorf("devapi: %w", err)
	}
	return a, nil
}

// HMACFunction is the logical ID of the webhook function addHMACFunction adds.
const HMACFunction = "WebhookHmacFunction"

// addHMACFunction adds a webhook function for the configurable HMAC preset on POST
// /webhooks/hmac, with the settings of the process environment, when that describes one
// (config.HMACHeaderSetting is set) and the template has no such function. The template
// deploys named presets; a local run is where the settings of another sender are tried. The
// function is a copy of the template's first webhook function (its timeout, its environment
// and its API) with WEBHOOK_PROVIDER=hmac.
func addHMACFunction(t *samtemplate.Template, getenv func(string) string) {
	if strings.TrimSpace(getenv(config.HMACHeaderSetting)) == "" {
		return
	}
	if _, ok := t.WebhookFunction(config.HMACProvider); ok {
		return
	}
	i := slices.IndexFunc(t.Functions, func(f samtemplate.Function) bool { return f.Code == samtemplate.Webhook && len(f.Routes) > 0 })
	if i < 0 {
		return
	}
	f := t.Functions[i]
	f.LogicalID, f.Env = HMACFunction, maps.Clone(f.Env)
	f.Env[webhookhandler.EnvProvider] = config.HMACProvider
	route := f.Routes[0]
	route.Path, route.Function = "/webhooks/"+config.HMACProvider, f.LogicalID
	f.Routes = []samtemplate.Route{route}
	t.Functions = append(t.Functions, f)
	slices.SortFunc(t.Functions, func(a, b samtemplate.Function) int { return strings.Compare(a.LogicalID, b.LogicalID) })
}

// ErrUnknownProvider is wrapped by the error of New and ResolveParameters for a member of
// ProvidersParameter that is not a key of the template's ProvidersMapping (the template's own
// rule refuses it too, at deploy).
var ErrUnknownProvider = errors.New("devapi: unknown webhook provider")

// ResolveParameters returns params as the template at path takes them: AllProviders, as the
// value of ProvidersParameter, replaced by every key of the template's ProvidersMapping. A member
// of ProvidersParameter that is no key of that mapping is an error wrapping ErrUnknownProvider,
// which names the keys.
func ResolveParameters(template string, params map[string]string) (map[string]string, error) {
	list, ok := params[ProvidersParameter]
	if !ok {
		return params, nil
	}
	t, err := samtemplate.Load(template)
	if err != nil {
		return nil, fmt.Errorf("devapi: %w", err)
	}
	keys := slices.Sorted(maps.Keys(t.Mappings[ProvidersMapping]))
	if len(keys) == 0 {
		return nil, fmt.Errorf("devapi: %s is given, but %s has no mapping %s", ProvidersParameter, template, ProvidersMapping)
	}
	if strings.TrimSpace(list) == AllProviders {
		params = maps.Clone(params)
		params[ProvidersParameter] = strings.Join(keys, ",")
		return params, nil
	}
	for _, k := range strings.Split(list, ",") {
		if !slices.Contains(keys, strings.TrimSpace(k)) {
			return nil, fmt.Errorf("%w %q in %s (one of %s, or %s)", ErrUnknownProvider, strings.TrimSpace(k), ProvidersParameter, strings.Join(keys, ", "), AllProviders)
		}
	}
	return params, nil
}

// envOf returns a function's getenv: the fixed variables, then the process environment, then
// the local defaults.
func envOf(cfg Config, local, fixed map[string]string) func(string) string {
	return func(name string) string {
		if v, ok := fixed[name]; ok {
			return v
		}
		if v := cfg.Getenv(name); v != "" {
			return v
		}
		return local[name]
	}
}

// startConsumer builds the template's consumer function, if it has one, and the in-process
// queue that feeds it: the webhook functions' sink unless WEBHOOK_SINK is set in the process
// environment. So `make run` shows the whole pipeline: the webhook function's line, then the
// consumer's, for each event.
func (a *API) startConsumer(ctx context.Context, t *samtemplate.Template, cfg Config) (*localQueue, error) {
	for _, f := range t.Functions {
		if f.Code != samtemplate.Consumer {
			continue
		}
		local, fixed := localEnv(f, cfg.Secrets)
		opts := []consumerhandler.Option{consumerhandler.WithRedis(a.Redis.Client), consumerhandler.WithLogOutput(cfg.LogOutput),
			consumerhandler.WithPayloadStore(a.Payloads)}
		if cfg.Process != nil {
			opts = append(opts, consumerhandler.WithProcess(cfg.Process))
		}
		h, err := consumerhandler.New(ctx, envOf(cfg, local, fixed), opts...)
		if err != nil {
			return nil, fmt.Errorf("devapi: %s: %w", f.LogicalID, err)
		}
		q := newLocalQueue(h, f.Timeout, cfg.AccessLog)
		a.closers = append(a.closers, h.Close, q.Close)
		return q, nil
	}
	return nil, nil
}

// openRedis builds the shared client: for REDIS_URL and the other REDIS_* variables, or for an
// embedded miniredis started here when REDIS_URL is unset, through redisconn.Open either way,
// so the functions get the client settings they have in Lambda.
func (a *API) openRedis(ctx context.Context, getenv func(string) string) error {
	// This process is not a Lambda runtime, whatever its environment says.
	outside := func(name string) string {
		if name == redisconn.EnvRuntimeAPI {
			return ""
		}
		return getenv(name)
	}
	var settings redisconn.Settings
	if strings.TrimSpace(getenv(redisconn.EnvURL)) != "" {
		var err error
		if settings, err = redisconn.SettingsFromEnv(outside); err != nil {
			return fmt.Errorf("devapi: %w", err)
		}
	} else {
		// A setting meant for a real Redis would be silently ignored by the embedded one.
		for _, name := range []string{redisconn.EnvCluster, redisconn.EnvAuthSecretARN, redisconn.EnvIAMAuth} {
			if strings.TrimSpace(getenv(name)) != "" {
				return fmt.Errorf("devapi: %w", &setting.Error{Var: name, Reason: "set without " + redisconn.EnvURL + ", which the embedded Redis does not take"})
			}
		}
		m := miniredis.NewMiniRedis()
		// Without it the embedded server's TTLs only run down when a test fast-forwards them,
		// and no record of a local run would ever expire (IDEM_RESULT_TTL, IDEM_LOCK_TTL).
		m.ClockTTL(true)
		if err := m.Start(); err != nil {
			return fmt.Errorf("devapi: start the embedded Redis: %w", err)
		}
		a.embedded = m
		a.closers = append(a.closers, func() error { m.Close(); return nil })
		settings = redisconn.Settings{URL: "redis://" + m.Addr()}
	}
	conn, err := redisconn.Open(ctx, settings)
	if err != nil {
		_ = a.Close()
		return fmt.Errorf("devapi: %w", err)
	}
	a.Redis = conn
	a.closers = append(a.closers, conn.Close)
	return nil
}

// Embedded reports whether the functions share an embedded miniredis, started by New because
// REDIS_URL is unset.
func (a *API) Embedded() bool { return a.embedded != nil }

// localEnv returns the local defaults of f (the template's variables without deployOnly, and
// the local sink and ledger) and the variables that the process environment cannot change.
func localEnv(f samtemplate.Function, extra map[string][]string) (local, fixed map[string]string) {
	local = maps.Clone(f.Env)
	for _, name := range deployOnly {
		delete(local, name)
	}
	fixed = map[string]string{
		redisconn.EnvRuntimeAPI:        "",
		webhookhandler.EnvFunctionName: f.LogicalID,
	}
	switch f.Code {
	case samtemplate.Webhook:
		provider := f.Env[webhookhandler.EnvProvider]
		local["WEBHOOK_SINK"] = "log"
		fixed[webhookhandler.EnvProvider] = provider
		fixed[webhookhandler.EnvSecret] = strings.Join(append([]string{DevSecret(provider)}, extra[provider]...), ",")
		fixed[webhookhandler.EnvSecretARN] = ""
	case samtemplate.Payments:
		local[paymentshandler.EnvLedger] = paymentshandler.LedgerMemory
	}
	return local, fixed
}

// RoutesPath is where the development API answers GET with the webhook routes it serves, as
// JSON {"providers": ["github", ...]}: how the sender learns which of the template's routes
// a running local API serves. API Gateway has no such route; a deployed API answers 404.
const RoutesPath = "/_localapi/routes"

// Served is RoutesPath's answer.
type Served struct {
	// Providers are the webhook providers served, sorted (API.Providers).
	Providers []string `json:"providers"`
}

// ServeHTTP serves one request as API Gateway would, by invoking the route's function, and
// RoutesPath.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == RoutesPath && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Served{Providers: a.Providers()})
		return
	}
	a.gateway.ServeHTTP(w, r)
}

// Function returns the function called logicalID, or false.
func (a *API) Function(logicalID string) (Function, bool) {
	for _, f := range a.Functions {
		if f.LogicalID == logicalID {
			return f, true
		}
	}
	return Function{}, false
}

// RedisDescription says which Redis the functions share, for the start-up banner.
func (a *API) RedisDescription() string {
	if a.Embedded() {
		return "embedded Redis (miniredis) on " + a.Redis.Addr() + ", in this process; set REDIS_URL to use a real one"
	}
	return "Redis at " + a.Redis.Addr() + " (REDIS_URL)"
}

// Close closes the handlers and the shared Redis client, then stops the embedded Redis, if
// any. It returns the errors joined.
func (a *API) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	a.closers = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("devapi: close: %w", err)
	}
	return nil
}

// Providers returns the webhook providers served, sorted.
func (a *API) Providers() []string {
	var out []string
	for _, f := range a.Functions {
		if p := f.Provider(); p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// Provider returns the webhook provider of a function, or "".
func (f Function) Provider() string {
	if f.Code != samtemplate.Webhook {
		return ""
	}
	return strings.TrimSpace(f.Env[webhookhandler.EnvProvider])
}
