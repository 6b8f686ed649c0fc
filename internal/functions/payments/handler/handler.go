// Package handler is the payments API: POST /payments creates a payment exactly once per
// idempotency key and caller, GET /payments/{id} reads one back. It takes API Gateway HTTP API
// payload v2.0 events, so the Lambda function (functions/payments), the local API server and the
// tests all invoke the same Handle.
//
// A create request is parsed (idempotency key, then body), scoped to the caller's principal,
// and run under the idempotency core (pkg/idem) on Redis; the work writes the payment to the
// durable ledger (internal/ledger) with a conditional write on the same scoped key. The ledger is what
// makes the guarantee hold when Redis loses a record (failover, eviction, flush): the retry finds
// the payment already written and answers with it.
//
// POST /payments goes through idemhttp's Idempotency-Key middleware (pkg/idem/idemhttp), the
// same contract any Go HTTP API gets from the library, with the caller's principal as its
// caller and the ledger write as its work.
//
// The body of POST /payments is {"amount", "currency", "description"?, "metadata"?}, parsed
// strictly (see parseCreateRequest). Its content-type must be application/json (parameters
// allowed, a charset only utf-8) or absent (read as JSON: no browser form can send a body
// without one), else 415 unsupported_media_type before any Redis command. description and metadata
// are validated and count in the fingerprint, so reusing a key with other ones is a mismatch,
// but they are not part of the payment: ledger.Payment has no place for them yet.
//
// Responses (every body is JSON; errors are {"error": {"code", "message"}}):
//
//	POST /payments, GET /payments/{id}
//	  401 unauthenticated           PAYMENTS_AUTH is not none and the authorizer context names no
//	                                caller; answered before any Redis command or ledger access
//	POST /payments
//	  201                           the payment: id, amount, currency, status, created_at
//	  201 + idempotent-replayed     a retry of a completed request: the first response again;
//	                                also when Redis had lost the record and the ledger had not
//	  400 missing_idempotency_key   no idempotency-key header
//	  400 invalid_idempotency_key   not 1-255 printable ASCII characters, bare or quoted
//	  400 invalid_request           body invalid; the message names the field (or the JSON
//	                                syntax error and its byte offset)
//	  409 idempotency_key_in_use    the first request with this key is still running; retry-after
//	  413 body_too_large            body over MaxBodyBytes
//	  415 unsupported_media_type    a content-type other than application/json
//	  422 idempotency_key_reused    the key was used with a different body
//	  500 internal_error            the payment could not be confirmed; nothing cached, retry
//	  503 store_unavailable         Redis unreachable; nothing was written; retry-after
//	GET /payments/{id}
//	  200                           the payment, when it belongs to the caller
//	  404 not_found                 unknown id, or another caller's payment
//	  500 internal_error            the ledger could not be read
//	other paths 404 not_found; other methods on these paths 405 method_not_allowed with allow.
//
// Every request writes one JSON log line (internal/obs) with a route attribute. Its id is, for POST,
// obs.KeyID of the scoped key (principal and idempotency key: retries of one caller correlate,
// callers sharing a key do not, and the key itself is never logged), and for GET the payment id.
// Outcomes: executed (payment created, or read), replayed, in_progress, mismatch, rejected (the
// request was refused before any work), error.
package handler

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/redisguard"
	"github.com/idemlambda/idem/pkg/idem"
)

// FunctionName is the function attribute of every log line and the EMF dimension "function"
// outside Lambda. Inside Lambda it is the deployed function's name (EnvFunctionName), which
// holds the stack's name: two stacks in one account emit, and alarm on, metrics of their own.
const FunctionName = "payments"

// EnvFunctionName is set by Lambda to the deployed function's name.
const EnvFunctionName = "AWS_LAMBDA_FUNCTION_NAME"

// Function returns the function attribute of log lines for the environment read through
// getenv: the deployed function's name (EnvFunctionName), else FunctionName. A nil getenv
// means os.Getenv.
func Function(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if name := strings.TrimSpace(getenv(EnvFunctionName)); name != "" {
		return name
	}
	return FunctionName
}

// Scope is the idempotency scope of payment keys in the core.
const Scope = "payments"

// Routes, as API Gateway writes them in routeKey.
const (
	RouteCreate = "POST /payments"
	RouteGet    = "GET /payments/{id}"
)

// Handler serves the payments API. Build one per execution environment with New, at init, and
// call Handle for every event; it is safe for concurrent use.
type Handler struct {
	guard     *idem.Guard
	ledger    ledger.Ledger
	logger    *slog.Logger
	routeLog  routeLoggers // logger with each route attribute, made once rather than per request
	now       func() time.Time
	newID     func() string
	maxAmount int64
	auth      string          // PAYMENTS_AUTH: where principalOf finds the caller
	conn      *redisconn.Conn // opened by New and closed by Close; nil with WithRedis
	// prime is the guard Prime's synthetic request runs on: the same client and settings as
	// guard, but a result that expires after a millisecond.
	prime *idem.Guard
	// createOnGuard is POST /payments through idemhttp's middleware on guard (see newCreate).
	createOnGuard func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
}

// Option changes what New builds.
type Option func(*options)

type options struct {
	redis     redis.UniversalClient
	ledger    ledger.Ledger
	now       func() time.Time
	logOutput io.Writer
	newID     func() string
	guardOpts []idem.Option
	redisOpts []redisconn.Option
}

// WithRedis makes the handler use client instead of the one REDIS_* describes (which are then
// not read). Close leaves client open: it belongs to the caller.
func WithRedis(client redis.UniversalClient) Option {
	return func(o *options) { o.redis = client }
}

// WithRedisOptions passes opts to redisconn.Open when the handler builds its own client (no
// WithRedis), e.g. redisconn.WithWarmUp in the Lambda function's init.
func WithRedisOptions(opts ...redisconn.Option) Option {
	return func(o *options) { o.redisOpts = append(o.redisOpts, opts...) }
}

// WithLedger makes the handler store payments in l instead of the ledger PAYMENTS_LEDGER and
// PAYMENTS_TABLE describe (which are then not read).
func WithLedger(l ledger.Ledger) Option {
	return func(o *options) { o.ledger = l }
}

// WithClock sets the clock that stamps created_at. Default time.Now. The idempotency core keeps
// the real clock, since its deadlines are real.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithLogOutput sets where the request log lines go. Default os.Stdout (CloudWatch Logs in
// Lambda).
func WithLogOutput(w io.Writer) Option {
	return func(o *options) { o.logOutput = w }
}

// WithIDGenerator sets the generator of payment ids. Default: "pay_" followed by 26 lower-case
// base32 characters (128 random bits). Ids must be 1 to 255 characters from [A-Za-z0-9_-], or
// GET cannot find them; on a (vanishingly unlikely) collision a new id is drawn.
func WithIDGenerator(newID func() string) Option {
	return func(o *options) { o.newID = newID }
}

// WithGuardOptions adds options of the idempotency core after those IDEM_* set (so they win),
// for example idem.WithLockTTL in tests.
func WithGuardOptions(opts ...idem.Option) Option {
	return func(o *options) { o.guardOpts = append(o.guardOpts, opts...) }
}

// New builds the handler once, from the settings read through getenv (os.Getenv in production;
// nil means os.Getenv):
//
//	REDIS_URL, REDIS_CLUSTER, ...  the Redis client, see internal/redisconn (lazy: never dialled here)
//	IDEM_KEY_PREFIX                namespace of the core's keys, default "idem"
//	IDEM_RESULT_TTL                how long a response is replayed from Redis, default 24h
//	IDEM_LOCK_TTL                  in-progress claim lifetime, default from the invocation deadline
//	LOG_LEVEL                      debug, info, warn, error; default info
//	PAYMENTS_AUTH                  iam, jwt, lambda or none: where the caller's principal comes
//	                               from; required inside Lambda, default none outside
//	PAYMENTS_LEDGER                dynamodb (default inside Lambda) or memory (default outside)
//	PAYMENTS_TABLE                 the DynamoDB table; required with dynamodb
//	PAYMENTS_MAX_AMOUNT            largest amount in minor units, default 99999999
//	AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS_ACCESS_KEY_ID, ...  the DynamoDB client, the
//	                               standard SDK way (config.LoadDefaultConfig)
//
// A missing or malformed setting is a *setting.Error naming the variable (errors.As). New never waits for
// Redis or DynamoDB. Call Close when done.
func New(ctx context.Context, getenv func(string) string, opts ...Option) (*Handler, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	o := options{now: time.Now, logOutput: os.Stdout, newID: newPaymentID}
	for _, opt := range opts {
		opt(&o)
	}
	level, err := obs.LevelFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	s, err := readSettings(getenv, o.ledger == nil)
	if err != nil {
		return nil, err
	}
	guardOpts, err := guardOptionsFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		ledger:    o.ledger,
		logger:    obs.NewLogger(o.logOutput, level, Function(getenv)),
		now:       o.now,
		newID:     o.newID,
		maxAmount: s.maxAmount,
		auth:      s.auth,
	}
	h.routeLog = newRouteLoggers(h.logger)
	awsCfg, err := h.openLedger(ctx, getenv, s)
	if err != nil {
		return nil, err
	}
	if err := h.openGuards(ctx, getenv, o, awsCfg, guardOpts); err != nil {
		return nil, err
	}
	if o.ledger == nil && s.ledger == LedgerMemory && s.insideLambda {
		h.logger.Warn("payments are kept in this execution environment's memory only",
			slog.String("variable", EnvLedger), slog.String("value", LedgerMemory))
	}
	return h, nil
}

// openLedger sets h.ledger, unless WithLedger gave one, to the ledger PAYMENTS_LEDGER names. For
// DynamoDB it returns the AWS configuration it loaded, which the Redis connection then signs
// IAM tokens and reads secrets with; otherwise nil.
func (h *Handler) openLedger(ctx context.Context, getenv func(string) string, s settings) (*aws.Config, error) {
	if h.ledger != nil {
		return nil, nil
	}
	switch s.ledger {
	case LedgerMemory:
		h.ledger = ledger.NewMemory()
	case LedgerDynamoDB:
		cfg, err := awsConfigFromEnv(ctx, getenv)
		if err != nil {
			return nil, err
		}
		if h.ledger, err = dynamoLedgerFromEnv(cfg, getenv, s.table); err != nil {
			return nil, err
		}
		return &cfg, nil
	}
	return nil, nil
}

// openGuards opens the Redis connection (unless WithRedis gave a client) and builds on it the
// guard, the guard Prime runs on, and POST /payments through idemhttp. guardOpts are the core's
// settings from IDEM_*; fencing, the observer and WithGuardOptions go after them.
func (h *Handler) openGuards(ctx context.Context, getenv func(string) string, o options, awsCfg *aws.Config, guardOpts []idem.Option) error {
	rc := redisguard.Config{Client: o.redis, AWS: awsCfg, RedisOptions: o.redisOpts,
		// Fencing: the ledger reads the claim's token and refuses an owner whose claim was taken over.
		GuardOptions: append(append(guardOpts, idem.WithFencing(), idem.WithObserver(obs.GuardObserver(h.logger))), o.guardOpts...)}
	var err error
	if rc.Client == nil {
		if rc.Settings, err = redisconn.SettingsFromEnv(getenv); err != nil {
			return fmt.Errorf("payments: redis: %w", err)
		}
	}
	if h.guard, h.conn, err = redisguard.Open(ctx, rc); err != nil {
		return fmt.Errorf("payments: %w", err)
	}
	client := o.redis
	if client == nil {
		client = h.conn.Client
	}
	if h.prime, err = idem.New(client, append(rc.GuardOptions, idem.WithResultTTL(time.Millisecond))...); err != nil {
		return fmt.Errorf("payments: %w", errors.Join(err, h.conn.Close()))
	}
	if h.createOnGuard, err = h.newCreate(h.guard); err != nil {
		return errors.Join(err, h.conn.Close())
	}
	return nil
}

// Close releases what New opened: the Redis client built from REDIS_*. A client passed with
// WithRedis is left open. Calling Close again returns the first
// call's result.
func (h *Handler) Close() error {
	if err := h.conn.Close(); err != nil {
		return fmt.Errorf("payments: close: %w", err)
	}
	return nil
}

// Handle serves one API Gateway HTTP API (payload v2.0) request and writes its log line. It
// always answers with a response, never with an error, so API Gateway never turns a failure
// into a bare 502.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	rt := matchRoute(req)
	return obs.Served(ctx, h.routeLog.of(rt.key), func() (events.APIGatewayV2HTTPResponse, obs.Request) {
		resp, rec := h.serve(ctx, req, rt)
		rec.Status = resp.StatusCode
		return resp, rec
	}), nil
}

// serve answers a request for rt; it returns the response and what the log line records of it.
func (h *Handler) serve(ctx context.Context, req events.APIGatewayV2HTTPRequest, rt route) (events.APIGatewayV2HTTPResponse, obs.Request) {
	principal, authenticated := principalOf(req, h.auth)
	switch {
	case (rt.key == RouteCreate || rt.key == RouteGet) && !authenticated:
		// Before anything else: an unidentified caller learns nothing and costs no Redis
		// command and no ledger read.
		return apigw.Error(401, "unauthenticated",
			"this request carries no caller identity from the "+h.auth+" authorizer"), rejected("unauthenticated")
	case rt.key == RouteCreate:
		return h.create(ctx, req, principal)
	case rt.key == RouteGet:
		return h.get(ctx, req, rt.id, principal)
	case rt.allow != "":
		return apigw.Error(405, "method_not_allowed", "this path accepts "+rt.allow, "allow", rt.allow), rejected("method_not_allowed")
	default:
		return apigw.Error(404, "not_found", "no such route"), rejected("no_route")
	}
}

// routeLoggers are a logger with the route attribute of each route key, and of none.
type routeLoggers struct {
	create, get, unmatched *slog.Logger
}

func newRouteLoggers(l *slog.Logger) routeLoggers {
	with := func(route string) *slog.Logger { return l.With(slog.String("route", route)) }
	return routeLoggers{create: with(RouteCreate), get: with(RouteGet), unmatched: with("unmatched")}
}

// of returns the logger of the route key key (RouteCreate, RouteGet or "").
func (r routeLoggers) of(key string) *slog.Logger {
	switch key {
	case RouteCreate:
		return r.create
	case RouteGet:
		return r.get
	}
	return r.unmatched
}

// route is what matchRoute found: a route key (and its id), or the methods the path allows.
type route struct {
	key   string // RouteCreate, RouteGet or ""
	id    string // the {id} of RouteGet
	allow string // with key "": the method the path accepts, or "" for an unknown path
}

// matchRoute routes by the route key API Gateway matched; for a $default or ANY route it falls
// back to the method and the raw path (without the stage prefix of a named stage).
func matchRoute(req events.APIGatewayV2HTTPRequest) route {
	switch cmp.Or(req.RouteKey, req.RequestContext.RouteKey) {
	case RouteCreate:
		return route{key: RouteCreate}
	case RouteGet:
		return route{key: RouteGet, id: req.PathParameters["id"]}
	}
	return routeOfPath(strings.ToUpper(req.RequestContext.HTTP.Method), stagelessPath(req))
}

// stagelessPath is the request's raw path without the stage prefix of a named stage.
func stagelessPath(req events.APIGatewayV2HTTPRequest) string {
	path := cmp.Or(req.RawPath, req.RequestContext.HTTP.Path)
	if st := req.RequestContext.Stage; st != "" && st != "$default" {
		path = strings.TrimPrefix(path, "/"+st)
	}
	return path
}

// routeOfPath routes an upper-case method and a path without its stage: /payments and
// /payments/{id}, whose one segment is path-unescaped.
func routeOfPath(method, path string) route {
	switch rest, ok := strings.CutPrefix(path, "/payments"); {
	case ok && rest == "":
		if method != "POST" {
			return route{allow: "POST"}
		}
		return route{key: RouteCreate}
	case ok && len(rest) > 1 && rest[0] == '/' && !strings.Contains(rest[1:], "/"):
		if method != "GET" {
			return route{allow: "GET"}
		}
		id, err := url.PathUnescape(rest[1:])
		if err != nil {
			return route{}
		}
		return route{key: RouteGet, id: id}
	}
	return route{}
}

// rejected is the log record of a request refused before any work.
func rejected(reason string) obs.Request {
	return obs.Request{Outcome: obs.OutcomeRejected, Reason: reason}
}

// paymentIDAlphabet is the RFC 4648 base32 alphabet in lower case.
const paymentIDAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// newPaymentID returns "pay_" and 128 random bits as 26 lower-case base32 characters: what
// strings.ToLower(rand.Text()) is, written in one buffer.
func newPaymentID() string {
	var b [len("pay_") + 26]byte
	copy(b[:], "pay_")
	rand.Read(b[len("pay_"):]) // never fails (crypto/rand)
	for i := len("pay_"); i < len(b); i++ {
		b[i] = paymentIDAlphabet[b[i]%32]
	}
	return string(b[:])
}
