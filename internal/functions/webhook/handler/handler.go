// Package handler is the webhook function: it receives one provider's deliveries from API
// Gateway HTTP API (payload v2.0), verifies them, and forwards each event to the sink exactly
// once however often the provider delivers it, with the idempotency core on Redis deciding
// which delivery does the work.
//
// The Lambda entry point (functions/webhook) builds one Handler at init and passes its Handle
// method to lambda.Start; a local API server and the tests call the same Handle in-process.
//
// Responses, all JSON with content-type application/json, errors shaped
// {"error": {"code": ..., "message": ...}}:
//
//	situation                                        status  code                        Redis
//	not POST                                         405     method_not_allowed          no
//	path is not /webhooks/<provider>                 404     not_found                   no
//	body over WEBHOOK_MAX_BODY (default 6 MiB)       413     body_too_large              no
//	isBase64Encoded but not base64                   400     invalid_encoding            no
//	signature headers missing                        401     missing_signature           no
//	signature malformed or not matching any secret   401     invalid_signature           no
//	signed timestamp outside the tolerance           401     timestamp_out_of_tolerance  no
//	body not the provider's JSON (or, for any        400     invalid_payload             no
//	provider, not one JSON document)
//	no event id (dedupe key)                         400     missing_event_id            no
//	event id unusable as a key (too long, control)   400     invalid_event_id            no
//	endpoint handshake (Slack url_verification,      200     as the sender documents     no
//	Discord PING, Zoom endpoint.url_validation,              (logged as outcome handshake)
//	Twitch challenge, WooCommerce ping, Intercom
//	ping) or Slack's app_rate_limited notice
//	first delivery, forwarded                        200     {"received": true, "id", "delivery_id", "type"}
//	several events (Adyen notification items), each  200     the sender's answer ([accepted], text/plain),
//	claimed and forwarded on its own (items.go)              or the refusal of the item most to retry
//	duplicate after completion                       200     same body, idempotent-replayed: true
//	duplicate while the first is in progress         409     in_progress, retry-after
//	same event id, different payload                 422     event_id_reused
//	Redis unreachable                                503     store_unavailable, retry-after
//	sink or processing failed (claim released)       500     processing_failed
//	event over the queue's or bus's message limit    413     event_too_large             yes
//	and no WEBHOOK_PAYLOAD_BUCKET (claim released)
//
// The handler serves any preset of package webhook (WEBHOOK_PROVIDER=<preset>, or hmac with the
// WEBHOOK_HMAC_* settings) and holds no provider's name: the preset says how to verify, where
// the key comes from, what the fingerprint covers, what the sink receives and which handshake
// to answer. A delivery's key is the sender's signed identity (webhook.Delivery.ID): the signed
// event id, or, where the signature does not cover the sender's id, a digest of the signed
// content. A signed body seen before is therefore a replay (or, for a signed id with another
// payload, a mismatch) whatever unsigned delivery id or event type comes with it; the sink event
// names those unsigned fields, and delivery_id appears in the receipt and in the request's log
// line only for senders whose delivery id is unsigned.
// Errors and ids reach the request's log line bounded by obs.LogRequest.
//
// When the event was forwarded but its result could not be stored (the claim expired, or
// Redis failed between claim and completion), the answer is still 200, since a failure would
// make the provider deliver again; the request is logged with outcome error.
package handler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/jsonstr"
	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/redisguard"
	"github.com/idemlambda/idem/internal/refusal"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/webhook"
)

// defaultBodyLimit is EnvMaxBody's default: MaxBodyLimit, the 6 MiB (6,291,456 bytes) of a
// synchronous Lambda invocation's payload, decoded. Lambda refuses a larger invocation before
// the function runs, and the event's JSON around the body only adds to it, so no delivery that
// reached the function is refused for its size. A body API Gateway base64-encodes (a binary
// content type) reaches it only up to about 4.5 MiB decoded (3/4 of 6 MiB, less the event's
// headers); a JSON body sent as text up to 6 MiB less its escaping and the event's headers.
// Events over the sink's message limit go to the payload bucket (sink.PayloadStore).
const defaultBodyLimit = MaxBodyLimit

// Machine codes of the error responses, stable across releases.
const (
	codeMethodNotAllowed  = "method_not_allowed"
	codeNotFound          = "not_found"
	codeBodyTooLarge      = "body_too_large"
	codeInvalidEncoding   = "invalid_encoding"
	codeMissingSignature  = "missing_signature"
	codeInvalidSignature  = "invalid_signature"
	codeTimestamp         = "timestamp_out_of_tolerance"
	codeInvalidPayload    = "invalid_payload"
	codeMissingEventID    = "missing_event_id"
	codeInvalidEventID    = "invalid_event_id"
	codeInProgress        = "in_progress"
	codeEventIDReused     = "event_id_reused"
	codeStoreUnavailable  = "store_unavailable"
	codeProcessingFailed  = "processing_failed"
	codeEventTooLarge     = "event_too_large"
	reasonLockLost        = "lock_lost"
	reasonResultNotStored = "result_not_stored"
	// reasonResultNotReplayable: the event was forwarded, but its result could not be stored;
	// a marker stands in for it.
	reasonResultNotReplayable = "result_not_replayable"
)

// Handler answers one provider's webhook deliveries. Build it once per execution environment
// with New; Handle is safe for concurrent use.
type Handler struct {
	verifier  *webhook.Verifier
	name      string // WEBHOOK_PROVIDER: the route, the key scope and the log's provider
	publicURL string // config.PublicURLSetting, or "" to rebuild the URL from the event
	route     string
	maxBody   int
	guard     *idem.Guard
	sink      sink.Sink
	logger    *slog.Logger
	now       func() time.Time
	conn      *redisconn.Conn // nil when the client came from WithRedis
}

// New builds everything a request needs, once: the settings (see the Env constants, and
// those of redisconn, idem, sink and obs), the signing secrets (one Secrets Manager read for
// WEBHOOK_SECRET_ARN), the verifier of the preset, the sink, the Redis client and the idempotency guard.
//
// Inside Lambda (AWS_LAMBDA_RUNTIME_API set) WEBHOOK_SECRET or WEBHOOK_SECRET_ARN is
// required, and a development secret (webhook.DevSecret of any preset) from either is refused with
// a *setting.Error naming the variable, unless AWS_SAM_LOCAL is true. Outside Lambda, with
// neither set, the handler accepts webhook.DevSecret(provider) and logs it at init, so a local API
// works without configuration.
//
// New never dials Redis: a Redis that is down costs nothing here, and requests get a 503
// until it answers. A missing or malformed setting is an error naming the variable (a
// *setting.Error for the function's own variables and redisconn's, the wrapped error of idem or
// sink for theirs).
func New(ctx context.Context, getenv func(string) string, opts ...Option) (*Handler, error) {
	o := options{now: time.Now, logOut: os.Stdout}
	for _, opt := range opts {
		opt(&o)
	}
	s, err := readSettings(getenv, o.secretsSet)
	if err != nil {
		return nil, err
	}
	var redisSettings redisconn.Settings
	if o.redis == nil {
		if redisSettings, err = redisconn.SettingsFromEnv(getenv); err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
	}
	logger := obs.NewLogger(o.logOut, s.level, s.function)

	secrets, secretVar, awsCfg, err := resolveSecrets(ctx, s, o, logger)
	if err != nil {
		return nil, err
	}
	if !o.secretsSet {
		if err := refuseDevSecrets(s, secrets, secretVar); err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
	}
	verifier, err := config.NewVerifier(s.provider, secrets, s.tolerance, getenv)
	if err != nil {
		return nil, providerError(err, secretVar)
	}
	idemOpts, err := config.IdemOptions(getenv, verifier.ResultTTL())
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}

	snk := o.sink
	if snk == nil {
		if snk, err = sink.FromEnv(ctx, getenv, o.logOut, o.payloads); err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
	}
	if limit, needs := sink.NeedsPayloadStore(snk); needs {
		logger.Warn("events over the sink's message limit will be refused with 413 "+codeEventTooLarge+": set "+sink.EnvPayloadBucket+" to keep them in S3",
			"message_limit", limit, "max_body", s.maxBody)
	}

	h := &Handler{
		verifier:  verifier,
		name:      s.provider,
		publicURL: s.publicURL,
		route:     "/webhooks/" + s.provider,
		maxBody:   s.maxBody,
		sink:      snk,
		logger:    logger,
		now:       o.now,
	}
	if h.guard, h.conn, err = redisguard.Open(ctx, redisguard.Config{
		Client:       o.redis,
		Settings:     redisSettings,
		AWS:          awsCfg,
		RedisOptions: o.redisOpts,
		GuardOptions: append(append(idemOpts, idem.WithObserver(obs.GuardObserver(logger))), o.guardOpts...),
	}); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	logger.Debug("webhook handler ready", "provider", h.name, "route", h.route,
		"secrets", len(secrets), "max_body", h.maxBody)
	return h, nil
}

// resolveSecrets returns the signing secrets and the variable they come from: WithSecrets, the
// Secrets Manager secret of EnvSecretARN (read once, through a client that honours
// AWS_ENDPOINT_URL_SECRETS_MANAGER), EnvSecret, or outside Lambda the development secret. It
// returns the AWS configuration it loaded, if any, for redisconn to share.
func resolveSecrets(ctx context.Context, s settings, o options, logger *slog.Logger) ([]string, string, *aws.Config, error) {
	switch {
	case o.secretsSet:
		return o.secrets, EnvSecret, nil, nil
	case s.secretARN != "":
		var awsCfg *aws.Config
		client := o.secretsClient
		if client == nil {
			// Loading the configuration makes no network call.
			cfg, err := awsconfig.LoadDefaultConfig(ctx)
			if err != nil {
				return nil, "", nil, fmt.Errorf("%w: %w", &setting.Error{Var: EnvSecretARN, Reason: "cannot load the AWS configuration"}, err)
			}
			awsCfg = &cfg
			client = secretsmanager.NewFromConfig(cfg)
		}
		secrets, err := readSecret(ctx, client, s.secretARN)
		return secrets, EnvSecretARN, awsCfg, err
	case len(s.secrets) > 0:
		return s.secrets, EnvSecret, nil, nil
	}
	secrets := []string{webhook.DevSecret(s.provider)}
	logger.Warn("no "+EnvSecret+" or "+EnvSecretARN+" outside Lambda: accepting deliveries signed with the development secret",
		"provider", s.provider, "dev_secret", secrets[0])
	return secrets, EnvSecret, nil, nil
}

// Close releases what New built: the Redis client. A client given with WithRedis is left
// open. Calls after the first return the first's result.
func (h *Handler) Close() error {
	if err := h.conn.Close(); err != nil {
		return fmt.Errorf("webhook: close: %w", err)
	}
	return nil
}

// Handle answers one delivery (see the package documentation for every response) and writes
// exactly one log line for it with obs.LogRequest. It never returns an error: every failure
// is an HTTP response, so API Gateway never substitutes its own.
func (h *Handler) Handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return obs.Served(ctx, h.logger, func() (events.APIGatewayV2HTTPResponse, obs.Request) {
		resp, rec := h.handle(ctx, req)
		rec.Provider, rec.Status = h.name, resp.StatusCode
		return resp, rec
	}), nil
}

// handle is the request path, top to bottom: route, body, signature, event, claim and
// forward, response. It returns the response and what the log line records of it.
func (h *Handler) handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, obs.Request) {
	method := req.RequestContext.HTTP.Method
	if method == "" {
		method, _, _ = strings.Cut(req.RouteKey, " ")
	}
	if method != http.MethodPost {
		return reject(http.StatusMethodNotAllowed, codeMethodNotAllowed, "webhooks are delivered with POST", nil, "allow", http.MethodPost)
	}
	// A named stage prefixes the path with /<stage>, hence a suffix match.
	if path := cmp.Or(req.RawPath, req.RequestContext.HTTP.Path); path != "" && !strings.HasSuffix(path, h.route) {
		return reject(http.StatusNotFound, codeNotFound, "this function answers POST "+h.route, nil)
	}

	body, err := apigw.Body(req, h.maxBody)
	switch {
	case errors.Is(err, apigw.ErrBodyTooLarge):
		return reject(http.StatusRequestEntityTooLarge, codeBodyTooLarge, fmt.Sprintf("the body exceeds %d bytes", h.maxBody), err)
	case err != nil:
		return reject(http.StatusBadRequest, codeInvalidEncoding, "the body is marked base64-encoded but is not base64", err)
	}

	// The sender signed these bytes, at this URL (URL-signing senders sign it too). Nothing
	// below Verify runs for a delivery the provider did not sign, nor for one it signed that is
	// not its event: no Redis command, no sink.
	// Verify reads the headers and keeps none of the map: it is borrowed for the call.
	header := apigw.BorrowHTTPHeader(req.Headers)
	d, err := h.verifier.Verify(webhook.Request{
		Header: header.Header,
		Body:   body,
		URL:    apigw.PublicURL(req.RequestContext.DomainName, req.RawPath, req.RawQueryString, h.publicURL),
		Method: method,
		Now:    h.now(),
	})
	header.Release()
	if err != nil {
		return h.refuseDelivery(err)
	}
	if len(d.Items) > 0 {
		// Several events in one delivery (Adyen), each claimed and forwarded on its own.
		return h.handleItems(ctx, d)
	}
	if d.Handshake != nil {
		// The sender's endpoint check: answered as it documents, never deduplicated or
		// forwarded, and counted apart from executions.
		resp := events.APIGatewayV2HTTPResponse{
			StatusCode: http.StatusOK,
			Headers:    map[string]string{"content-type": d.Handshake.ContentType},
			Body:       string(d.Handshake.Body),
		}
		return resp, obs.Request{Outcome: obs.OutcomeHandshake, Reason: d.Handshake.Kind}
	}

	received := h.now()
	key := idem.Key{Scope: h.name, ID: d.ID}
	out, err := h.guard.Do(ctx, key, idem.Fingerprint(d.Fingerprint), func(ctx context.Context) (idem.Result, error) {
		return h.forward(ctx, d, received)
	})
	resp, rec := respond(out, err, d)
	// obs.LogRequest bounds both: an id too long to be a key is still logged.
	rec.ID, rec.DeliveryID = d.ID, d.DeliveryID
	rec.RoundTrips = out.RoundTrips
	return resp, rec
}

// forward is the work the guard runs once per event: hand the event to the sink, then
// describe it in the result every delivery of the event is answered with.
func (h *Handler) forward(ctx context.Context, d webhook.Delivery, received time.Time) (idem.Result, error) {
	err := h.sink.Send(ctx, sink.Event{
		Provider:   h.name,
		ID:         d.ID,
		DeliveryID: d.DeliveryID,
		Type:       d.Type,
		ObjectID:   d.ObjectID,
		Unsigned:   d.Unsigned,
		ReceivedAt: received,
		Body:       d.Payload,
	})
	if err != nil {
		return idem.Result{}, fmt.Errorf("webhook: forward %s event %s: %w", h.name, d.ID, err)
	}
	return idem.Result{Status: http.StatusOK, Body: receiptOf(d).appendJSON(nil)}, nil
}

// receiptOf is the receipt of d's first delivery.
func receiptOf(d webhook.Delivery) receipt {
	return receipt{Received: true, ID: d.ID, DeliveryID: d.DeliveryID, Type: d.Type}
}

// receipt is the body of a 200 answer to a delivery, stored and replayed to every retry.
// ID is the deduplication key; DeliveryID, set for senders whose delivery id is unsigned (GitHub,
// Shopify), is the delivery id the first delivery came with (a replay under another id is
// answered with the first's).
type receipt struct {
	Received   bool   `json:"received"`
	ID         string `json:"id"`
	DeliveryID string `json:"delivery_id,omitempty"`
	Type       string `json:"type"`
}

// appendJSON appends r as json.Marshal encodes it, without its reflection: the receipt is
// written on every first delivery.
func (r receipt) appendJSON(b []byte) []byte {
	b = slices.Grow(b, len(`{"received":false,"id":"","delivery_id":"","type":""}`)+len(r.ID)+len(r.DeliveryID)+len(r.Type))
	b = append(b, `{"received":`...)
	b = strconv.AppendBool(b, r.Received)
	b = append(b, `,"id":`...)
	b = jsonstr.Append(b, r.ID)
	if r.DeliveryID != "" {
		b = append(b, `,"delivery_id":`...)
		b = jsonstr.Append(b, r.DeliveryID)
	}
	b = append(b, `,"type":`...)
	b = jsonstr.Append(b, r.Type)
	return append(b, '}')
}

// respond maps the guard's outcome to the response and the log line's outcome.
func respond(out idem.Outcome, err error, d webhook.Delivery) (events.APIGatewayV2HTTPResponse, obs.Request) {
	switch out.Kind {
	case idem.NotReplayable:
		// The event reached the sink (here or in an earlier delivery) but its result could not
		// be stored: the marker left in its place stops every retry with a 200 and the receipt.
		if out.Ran {
			return apigw.Raw(out.Result.Status, out.Result.Body),
				obs.Request{Outcome: obs.OutcomeError, Reason: reasonResultNotReplayable, Err: err}
		}
		return apigw.Raw(http.StatusOK, receiptOf(d).appendJSON(nil), idemhttp.HeaderReplayed, "true"),
			obs.Request{Outcome: obs.OutcomeReplayed, Reason: reasonResultNotReplayable}
	case idem.Executed, idem.ExecutedUnguarded:
		return apigw.Raw(out.Result.Status, out.Result.Body), obs.Request{Outcome: obs.OutcomeExecuted}
	case idem.NotStored:
		// Forwarded, but the result is not stored: answering 200 stops the provider's
		// retries, which is right since the event reached the sink.
		return apigw.Raw(out.Result.Status, out.Result.Body),
			obs.Request{Outcome: obs.OutcomeError, Reason: reasonResultNotStored, Err: err}
	case idem.LockLost:
		return apigw.Raw(out.Result.Status, out.Result.Body),
			obs.Request{Outcome: obs.OutcomeError, Reason: reasonLockLost, Err: err}
	case idem.Replayed:
		return apigw.Raw(out.Result.Status, out.Result.Body, idemhttp.HeaderReplayed, "true"),
			obs.Request{Outcome: obs.OutcomeReplayed}
	case idem.InProgress:
		return refuse(out.Kind, codeInProgress, "this event is being processed; retry later"),
			obs.Request{Outcome: obs.OutcomeInProgress}
	case idem.Mismatch:
		return refuse(out.Kind, codeEventIDReused, "this event id was received before with a different payload"),
			obs.Request{Outcome: obs.OutcomeMismatch, Err: err}
	case idem.Unavailable:
		return refuse(out.Kind, codeStoreUnavailable, "the idempotency store is unavailable; retry later"),
			obs.Request{Outcome: obs.OutcomeError, Reason: codeStoreUnavailable, Err: err}
	case idem.InvalidKey:
		return refuse(out.Kind, codeInvalidEventID, "the event id cannot be used as a deduplication key"),
			obs.Request{Outcome: obs.OutcomeRejected, Reason: codeInvalidEventID, Err: err}
	default: // idem.Failed: the claim is released and nothing is stored.
		if errors.Is(err, sink.ErrTooLarge) {
			// The same event fails the same way on every retry: a retryable 500 would have the
			// sender retry until it disables the endpoint. The claim is released, so the event
			// delivered again once WEBHOOK_PAYLOAD_BUCKET is set goes through.
			return apigw.Error(http.StatusRequestEntityTooLarge, codeEventTooLarge,
					"the event exceeds the queue's or event bus's message limit and no payload bucket is configured"),
				obs.Request{Outcome: obs.OutcomeError, Reason: codeEventTooLarge, Err: err}
		}
		return apigw.Error(http.StatusInternalServerError, codeProcessingFailed, "the event could not be forwarded; retry later"),
			obs.Request{Outcome: obs.OutcomeError, Reason: codeProcessingFailed, Err: err}
	}
}

// refuse answers an outcome that sends no response of the work with the status and retry-after
// every HTTP front of the core gives it (refusal.Of), in this function's own codes.
func refuse(k idem.Kind, code, message string) events.APIGatewayV2HTTPResponse {
	r, _ := refusal.Of(k)
	return apigw.Error(r.Status, code, message, r.Header()...)
}

// refuseDelivery answers a delivery Verify refused: 401 for one the provider did not sign, 400
// for one it signed that is not its event.
func (h *Handler) refuseDelivery(err error) (events.APIGatewayV2HTTPResponse, obs.Request) {
	switch {
	case errors.Is(err, webhook.ErrNotSigned):
		return reject(http.StatusUnauthorized, codeMissingSignature, "the delivery is not signed", err)
	case errors.Is(err, webhook.ErrTooOld), errors.Is(err, webhook.ErrTooNew):
		return reject(http.StatusUnauthorized, codeTimestamp, "the signed timestamp is outside the accepted tolerance", err)
	case errors.Is(err, webhook.ErrInvalidHeader), errors.Is(err, webhook.ErrNoValidSignature), errors.Is(err, webhook.ErrNoPublicURL):
		return reject(http.StatusUnauthorized, codeInvalidSignature, "the signature is malformed or matches no accepted secret", err)
	case errors.Is(err, webhook.ErrNoEventID):
		return reject(http.StatusBadRequest, codeMissingEventID, "the delivery carries no event id", err)
	default: // webhook.ErrBadPayload
		return reject(http.StatusBadRequest, codeInvalidPayload, "the body is not a "+h.name+" event", err)
	}
}

// reject answers a delivery refused before any work, with Redis untouched.
func reject(status int, code, message string, err error, headers ...string) (events.APIGatewayV2HTTPResponse, obs.Request) {
	return apigw.Error(status, code, message, headers...), obs.Request{Outcome: obs.OutcomeRejected, Reason: code, Err: err}
}
