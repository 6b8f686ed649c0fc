// Package devapi runs every function of the SAM template in-process behind a local stand-in
// for the HTTP API (package gateway): the development API that `make run` serves, and that
// tests and the sender start in-process. It does what `sam local start-api` does without Docker,
// reading each function's routes, timeout and environment from the template (package
// samtemplate), and stands in for what a machine without AWS lacks:
//
//   - one Redis client shared by every function: the Redis at REDIS_URL (with the other REDIS_*
//     variables), or, when REDIS_URL is unset, an embedded miniredis started here, whose TTLs
//     run on the wall clock. Only this development API starts one: no deployed bootstrap links it;
//   - webhook functions accept their provider's development secret (webhook.DevSecret) and the
//     secrets Config.Secrets adds; their sink is the sqs sink sending to an in-process FIFO
//     queue that feeds the template's consumer function (the log sink when the template has
//     none), with an in-process store (API.Payloads) standing in for the payload bucket;
//   - the payments function uses the in-memory ledger, behind a stand-in for the authorizer
//     PAYMENTS_AUTH names, which takes the caller from HeaderPrincipal;
//   - variables that name AWS resources (secret ARNs, queue URL, event bus, bucket, table) are
//     unset;
//   - with WEBHOOK_HMAC_HEADER (and the other WEBHOOK_HMAC_* settings) in the process
//     environment, a webhook function for the hmac preset is added on POST /webhooks/hmac.
//
// Variables of the process environment take precedence over the template and these local
// defaults, except those that define a function: WEBHOOK_PROVIDER, the signing secret
// (WEBHOOK_SECRET, WEBHOOK_SECRET_ARN), AWS_LAMBDA_FUNCTION_NAME and AWS_LAMBDA_RUNTIME_API,
// never set, since this is not Lambda. Besides the template's routes it answers GET RoutesPath.
package devapi

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/config"
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

// RoutesPath is where the development API answers GET with the webhook providers it serves,
// as JSON Served: how the sender learns which routes a running local API serves. A deployed
// API answers 404.
const RoutesPath = "/_localapi/routes"

// Served is RoutesPath's answer.
type Served struct {
	// Providers are the webhook providers served, sorted (API.Providers).
	Providers []string `json:"providers"`
}

// Config says what to serve and where the output goes.
type Config struct {
	// Template is the SAM template's path. Default DefaultTemplate.
	Template string
	// Providers are the webhook providers to serve, as samtemplate.LoadProviders takes them:
	// empty for the template's default, samtemplate.AllProviders for every one it can deploy.
	Providers string
	// Getenv reads the process environment. Default os.Getenv.
	Getenv func(string) string
	// LogOutput receives the functions' log lines. Default os.Stdout, as in Lambda.
	LogOutput io.Writer
	// AccessLog receives the gateway's line per request. Default os.Stderr.
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

// Provider returns the webhook provider of a function, or "".
func (f Function) Provider() string {
	if f.Code != samtemplate.Webhook {
		return ""
	}
	return f.Env[webhookhandler.EnvProvider]
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

	embedded bool
	gateway  *gateway.Gateway
	closers  []func() error
}

// deployOnly are variables that name AWS resources, or configure the Redis client that is
// replaced by the shared one: a local run never takes them from the template.
var deployOnly = []string{
	webhookhandler.EnvSecretARN, "WEBHOOK_QUEUE_URL", "WEBHOOK_EVENT_BUS", sink.EnvPayloadBucket, paymentshandler.EnvTable,
	redisconn.EnvURL, redisconn.EnvCluster, redisconn.EnvAuthSecretARN, redisconn.EnvIAMAuth,
	redisconn.EnvCacheName, redisconn.EnvServerless,
}

// New opens the shared Redis client (starting the embedded Redis when REDIS_URL is unset) and
// builds every function's handler, as Lambda builds it at init. Nothing is dialled: a Redis
// that is down makes requests fail with 503, as in Lambda.
func New(ctx context.Context, cfg Config) (*API, error) {
	cfg.Template = cmp.Or(cfg.Template, DefaultTemplate)
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.LogOutput == nil {
		cfg.LogOutput = os.Stdout
	}
	if cfg.AccessLog == nil {
		cfg.AccessLog = os.Stderr
	}
	t, err := samtemplate.LoadProviders(cfg.Template, cfg.Providers)
	if err != nil {
		return nil, fmt.Errorf("devapi: %w", err)
	}
	addHMACFunction(t, cfg.Getenv)
	for provider := range cfg.Secrets {
		if _, ok := t.WebhookFunction(provider); !ok {
			return nil, fmt.Errorf("devapi: a secret is given for %q, which no webhook function of %s serves", provider, t.Path)
		}
	}
	a := &API{Template: t, Payloads: sink.NewMemoryStore("local-payloads")}
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
		queue = &localQueue{log: cfg.AccessLog, counts: map[string]int{}}
	}
	var functions []gateway.Function
	for _, f := range a.Template.Functions {
		local, fixed := localEnv(f, cfg.Secrets)
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
		delete(local, redisconn.EnvRuntimeAPI)
		a.Functions = append(a.Functions, Function{Function: f, LocalEnv: local})
		if h != nil {
			functions = append(functions, gateway.Function{Name: f.LogicalID, Timeout: f.Timeout, Handler: h})
		}
	}
	var err error
	a.gateway, err = gateway.New(a.Template.Routes(), functions, cfg.AccessLog)
	return err
}

// localEnv returns the local defaults of f (the template's variables without deployOnly, and
// the local sink and ledger) and the variables that the process environment cannot change.
func localEnv(f samtemplate.Function, extra map[string][]string) (local, fixed map[string]string) {
	local = maps.Clone(f.Env)
	for _, name := range deployOnly {
		delete(local, name)
	}
	fixed = map[string]string{redisconn.EnvRuntimeAPI: "", webhookhandler.EnvFunctionName: f.LogicalID}
	switch f.Code {
	case samtemplate.Webhook:
		provider := f.Env[webhookhandler.EnvProvider]
		local[sink.EnvSink] = "log"
		fixed[webhookhandler.EnvProvider] = provider
		fixed[webhookhandler.EnvSecret] = strings.Join(append([]string{webhook.DevSecret(provider)}, extra[provider]...), ",")
		fixed[webhookhandler.EnvSecretARN] = ""
	case samtemplate.Payments:
		local[paymentshandler.EnvLedger] = paymentshandler.LedgerMemory
	}
	return local, fixed
}

// HMACFunction is the logical ID of the webhook function addHMACFunction adds.
const HMACFunction = "WebhookHmacFunction"

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
	f.LogicalID, f.Env = HMACFunction, maps.Clone(f.Env)
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
		// This process is not a Lambda runtime, whatever its environment says.
		outside := func(name string) string {
			if name == redisconn.EnvRuntimeAPI {
				return ""
			}
			return getenv(name)
		}
		if settings, err = redisconn.SettingsFromEnv(outside); err != nil {
			return err
		}
	} else {
		// A setting meant for a real Redis would be silently ignored by the embedded one.
		for _, name := range []string{redisconn.EnvCluster, redisconn.EnvAuthSecretARN, redisconn.EnvIAMAuth} {
			if strings.TrimSpace(getenv(name)) != "" {
				return &setting.Error{Var: name, Reason: "set without " + redisconn.EnvURL + ", which the embedded Redis does not take"}
			}
		}
		m, err := startEmbedded()
		if err != nil {
			return err
		}
		a.embedded, settings.URL = true, "redis://"+m.Addr()
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

// startEmbedded starts a miniredis whose TTLs run on the wall clock (else no record of a local
// run would ever expire) and that runs the core's scripts, which begin with a shebang line
// (#!lua flags=allow-oom) its Lua compiler cannot parse: it drops that line before compiling,
// and answers an EVALSHA of the script as sent with the script it compiled. The flags have
// nothing to do there: allow-oom matters only under a memory limit, and miniredis has none.
func startEmbedded() (*miniredis.Miniredis, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("start the embedded Redis: %w", err)
	}
	var mu sync.Mutex
	bodies := map[string]string{} // SHA1 of a script with a shebang -> SHA1 of its body
	sha1Hex := func(s string) string { sum := sha1.Sum([]byte(s)); return hex.EncodeToString(sum[:]) }
	m.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if len(args) == 0 {
			return false
		}
		mu.Lock()
		script, shebang := strings.CutPrefix(args[0], "#!")
		sha, known := bodies[strings.ToLower(args[0])]
		switch {
		case shebang && (cmd == "EVAL" || cmd == "EVAL_RO"):
			_, body, _ := strings.Cut(script, "\n")
			bodies[sha1Hex(args[0])], sha = sha1Hex(body), body
		case !known || cmd != "EVALSHA" && cmd != "EVALSHA_RO":
			mu.Unlock()
			return false
		}
		mu.Unlock()
		m.Server().Dispatch(c, append([]string{cmd, sha}, args[1:]...))
		return true
	})
	return m, nil
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
	i := slices.IndexFunc(a.Functions, func(f Function) bool { return f.LogicalID == logicalID })
	if i < 0 {
		return Function{}, false
	}
	return a.Functions[i], true
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

// Embedded reports whether the functions share an embedded miniredis, started by New because
// REDIS_URL is unset.
func (a *API) Embedded() bool { return a.embedded }

// RedisDescription says which Redis the functions share, for the start-up banner.
func (a *API) RedisDescription() string {
	if a.embedded {
		return "embedded Redis (miniredis) on " + a.Redis.Addr() + ", in this process; set REDIS_URL to use a real one"
	}
	return "Redis at " + a.Redis.Addr() + " (REDIS_URL)"
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
