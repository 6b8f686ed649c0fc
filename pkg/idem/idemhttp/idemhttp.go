// Package idemhttp runs an HTTP request's work at most once per Idempotency-Key header, on the
// idempotency core (pkg/idem): the semantics of the payments API, for any handler.
//
// For a guarded method (POST and PATCH by default), in this order, before any Redis command:
// a request whose caller the WithCaller hook cannot name is 401 unauthenticated; a body over the
// limit is 413 body_too_large; a missing or malformed key (see ParseKey) is 400
// missing_idempotency_key or invalid_idempotency_key; a request the fingerprint function
// refuses is 400 invalid_request. Then one call to idem.Guard.Do, within its budget of 2 round
// trips for a first request, 1 for a replay or an in-progress duplicate, 2 for a failure:
//
//	first request              the handler's response; stored when successful (2xx by default)
//	same key, same payload     the first response again (status, headers, body) with
//	                           Idempotent-Replayed: true
//	same key, still running    409 idempotency_key_in_use, retry-after: 1
//	same key, other payload    422 idempotency_key_reused
//	same key, response not     409 idempotency_result_unavailable, no retry-after: the handler
//	kept (over 256 KiB)            ran once and does not run again; the first response was sent
//	                               to the first request only
//	Redis unreachable          503 store_unavailable, retry-after: 1; the handler does not run
//	handler failed             its own response (or error); the claim is released, so a retry
//	                           runs it again (500 internal_error after a panic)
//
// The payload is the method, the path and the body unless WithFingerprint says otherwise. The
// keys live in the scope given to New (the core's idem.Key.Scope: a namespace such as the API's
// name); with WithCaller each caller has keys of its own, so the same key from two callers names
// two units of work. Error bodies are {"error": {"code", "message"}} with content-type
// application/json; the codes above are stable across releases. The errors this package reports
// (ParseKey's, the core's through WithObserver) match the core's sentinels with errors.Is:
// idem.ErrInvalidKey, idem.ErrInProgress, idem.ErrMismatch, idem.ErrUnavailable.
//
// Middleware.Handler is net/http middleware (containers, the Lambda Web Adapter); APIGatewayProxy
// (REST API), HTTPAPI (HTTP API payload v2.0), FunctionURL and ALB wrap aws-lambda-go handlers
// of those events. The handler's response is buffered: streaming responses are not supported.
package idemhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/refusal"
	"github.com/idemlambda/idem/pkg/idem"
)

// defaultMaxBody is the largest request body accepted unless WithMaxBody says otherwise: 1 MiB.
const defaultMaxBody = 1 << 20

// defaultHeader is the request header carrying the key unless WithHeader says otherwise.
const defaultHeader = "Idempotency-Key"

// HeaderReplayed is set to "true" on a response that repeats the first response to the same
// key. It is written lower-case, as API Gateway HTTP APIs deliver header names; net/http
// writes it as Idempotent-Replayed, the same header.
const HeaderReplayed = "idempotent-replayed"

// Request is what the middleware reads of a request, whichever way it arrived.
type Request struct {
	Method string
	// Path is the request path without the query string.
	Path   string
	Header http.Header
	// Body is the raw body, base64 already decoded.
	Body []byte
	// Event is the request as the adapter received it: *http.Request,
	// events.APIGatewayProxyRequest, events.APIGatewayV2HTTPRequest,
	// events.LambdaFunctionURLRequest or events.ALBTargetGroupRequest. A Lambda caller's
	// identity is in the event's request context, where API Gateway's authorizer put it: for
	// an HTTP API, RequestContext.Authorizer (JWT.Claims["sub"], IAM.UserARN, Lambda, the
	// context a Lambda authorizer returned); for a REST API, RequestContext.Authorizer
	// (a map) and RequestContext.Identity. Caller hooks read it from here.
	Event any
}

// response is an HTTP response as the middleware stores and replays it. Header names are
// lower-case.
type response struct {
	Status int
	Header map[string][]string
	Body   []byte
}

// Middleware guards requests with an idempotency key. Build one at init with New and share it:
// it is safe for concurrent use.
type Middleware struct {
	guard       *idem.Guard
	scope       string
	header      string
	headerKey   string // header in canonical form, as http.Header holds it
	methods     map[string]bool
	caller      func(context.Context, *Request) (string, bool)
	fingerprint func(context.Context, *Request) (idem.Fingerprint, error)
	store       func(status int) bool
	maxBody     int
	observe     func(context.Context, idem.Outcome, error)
}

// Option configures a Middleware.
type Option func(*Middleware)

// WithHeader sets the request header that carries the key. Default Idempotency-Key.
func WithHeader(name string) Option { return func(m *Middleware) { m.header = name } }

// WithMethods sets the methods that need a key; requests of other methods pass through
// unguarded. Default POST and PATCH, the methods the IETF draft "The Idempotency-Key HTTP
// Header Field" names.
func WithMethods(methods ...string) Option {
	return func(m *Middleware) {
		m.methods = make(map[string]bool, len(methods))
		for _, x := range methods {
			m.methods[strings.ToUpper(x)] = true
		}
	}
}

// WithCaller gives each caller keys of its own: caller returns who sent the request (an IAM
// ARN, a JWT subject, an API key id; in a Lambda function, read from r.Event's authorizer
// context), and the same key from two callers names two units of work, so one caller never
// replays another's response. ok false answers 401 unauthenticated before any Redis command.
// Default: none, every caller shares the keys of the middleware's scope.
func WithCaller(caller func(ctx context.Context, r *Request) (caller string, ok bool)) Option {
	return func(m *Middleware) { m.caller = caller }
}

// WithFingerprint sets what counts as "the same payload": the same key with another fingerprint
// is 422 idempotency_key_reused. An error answers 400 invalid_request with the error's text, so
// it must not hold secrets. It runs after the key was read and before any Redis command, with
// the request's context. Default: the SHA-256 of the method, the path and the body.
func WithFingerprint(fingerprint func(ctx context.Context, r *Request) (idem.Fingerprint, error)) Option {
	return func(m *Middleware) { m.fingerprint = fingerprint }
}

// WithStored sets which statuses are successes: their responses are stored and replayed. Any
// other response is sent once, its claim released, so a retry runs the handler again. Default
// 200-299.
func WithStored(success func(status int) bool) Option {
	return func(m *Middleware) { m.store = success }
}

// WithMaxBody sets the largest request body accepted, in bytes; a larger one is 413. Default
// 1 MiB.
func WithMaxBody(n int) Option { return func(m *Middleware) { m.maxBody = n } }

// WithObserver calls observe after every guarded request that reached the core with what it
// reported, for logs and metrics: the outcome (its Kind and RoundTrips) and the core's
// explanation, which matches the sentinel of its Kind (idem.ErrInProgress, ...). A request
// refused before the core (401, 413, 400) is not observed. Default none.
func WithObserver(observe func(ctx context.Context, out idem.Outcome, err error)) Option {
	return func(m *Middleware) { m.observe = observe }
}

// New returns a Middleware that runs work under guard, with keys in scope (idem.Key.Scope: 1 to
// 64 characters from [A-Za-z0-9._:-], for example the API's name). A nil guard, a scope the core
// refuses, or an option's invalid value is an error.
func New(guard *idem.Guard, scope string, opts ...Option) (*Middleware, error) {
	if guard == nil {
		return nil, errors.New("idemhttp: nil guard")
	}
	if err := (idem.Key{Scope: scope, ID: "x"}).Validate(); err != nil {
		return nil, fmt.Errorf("idemhttp: %w", err)
	}
	m := &Middleware{guard: guard, scope: scope, header: defaultHeader, maxBody: defaultMaxBody,
		fingerprint: defaultFingerprint, store: is2xx}
	WithMethods(http.MethodPost, http.MethodPatch)(m)
	for _, opt := range opts {
		opt(m)
	}
	if m.header == "" || m.maxBody <= 0 || m.fingerprint == nil || m.store == nil {
		return nil, errors.New("idemhttp: empty header name, non-positive body limit, or nil function")
	}
	m.headerKey = textproto.CanonicalMIMEHeaderKey(m.header)
	return m, nil
}

func is2xx(status int) bool { return status >= 200 && status <= 299 }

// defaultFingerprint is the SHA-256 of the method, path and body, joined unambiguously.
func defaultFingerprint(_ context.Context, r *Request) (idem.Fingerprint, error) {
	return idem.FingerprintOf([]byte(idem.JoinID(r.Method, r.Path, string(r.Body)))), nil
}

// guards reports whether requests of method need a key.
func (m *Middleware) guards(method string) bool { return m.methods[strings.ToUpper(method)] }

// errNotStored is the work's error for a response that is not a success: the claim is released.
var errNotStored = errors.New("idemhttp: the response is not a success; not stored")

// serve is the path of every guarded request, whichever adapter received it: refuse, claim,
// run next, answer. An error is next's own, returned after the claim was released.
func (m *Middleware) serve(ctx context.Context, r *Request, next func(context.Context) (response, error)) (response, error) {
	if !m.guards(r.Method) {
		return next(ctx)
	}
	key, fp, denied, ok := m.admit(ctx, r)
	if !ok {
		return denied, nil
	}
	var ran response
	var handlerErr error
	out, err := m.guard.Do(ctx, key, fp, func(ctx context.Context) (idem.Result, error) {
		resp, err := next(ctx)
		if err != nil {
			handlerErr = err
			return idem.Result{}, err
		}
		ran = resp
		if !m.store(resp.Status) {
			return idem.Result{}, errNotStored
		}
		return idem.Result{Status: resp.Status, Headers: flatten(resp.Header), Body: resp.Body}, nil
	})
	if m.observe != nil {
		m.observe(ctx, out, err)
	}
	return answer(out, ran, handlerErr)
}

// admit reads the request's key and fingerprint, or refuses the request before any Redis
// command (401, 413, 400): ok false with the refusal's response.
func (m *Middleware) admit(ctx context.Context, r *Request) (key idem.Key, fp idem.Fingerprint, denied response, ok bool) {
	caller := ""
	if m.caller != nil {
		if caller, ok = m.caller(ctx, r); !ok {
			return key, fp, errorResponse(401, refusal.CodeUnauthenticated, "this request carries no caller identity"), false
		}
	}
	if len(r.Body) > m.maxBody {
		return key, fp, errorResponse(413, refusal.CodeBodyTooLarge, fmt.Sprintf("body: larger than %d bytes", m.maxBody)), false
	}
	var value string
	if vs := r.Header[m.headerKey]; len(vs) > 0 { // r.Header.Get(m.header), canonicalized once
		value = vs[0]
	}
	id, err := ParseKey(value)
	switch {
	case errors.Is(err, ErrMissingKey):
		return key, fp, errorResponse(400, refusal.CodeMissingKey, "the "+m.header+" header is required"), false
	case err != nil:
		return key, fp, errorResponse(400, refusal.CodeInvalidKey, err.Error()), false
	}
	if m.caller != nil {
		id = idem.JoinID(caller, id)
	}
	if fp, err = m.fingerprint(ctx, r); err != nil {
		return key, fp, errorResponse(400, refusal.CodeInvalidRequest, err.Error()), false
	}
	return idem.Key{Scope: m.scope, ID: id}, fp, denied, true
}

// answer is the response to a guarded request from the core's outcome, given the response
// the handler gave here (zero when it did not run or failed) and its error.
func answer(out idem.Outcome, ran response, handlerErr error) (response, error) {
	switch out.Kind {
	case idem.Executed, idem.LockLost, idem.NotStored, idem.ExecutedUnguarded:
		return ran, nil // the handler ran: its response stands, stored or not
	case idem.NotReplayable:
		if out.Ran {
			return ran, nil // the handler ran here; its response was too large to keep
		}
	case idem.Replayed:
		h := unflatten(out.Result.Headers)
		h[HeaderReplayed] = []string{"true"}
		return response{Status: out.Result.Status, Header: h, Body: out.Result.Body}, nil
	case idem.Failed:
		switch {
		case handlerErr != nil:
			return response{}, handlerErr
		case ran.Status != 0:
			return ran, nil // not a success, or too large to store: sent once
		}
		return errorResponse(500, refusal.CodeInternal, "the request could not be completed; retry with the same idempotency key"), nil
	}
	if r, ok := refusal.Of(out.Kind); ok {
		return refused(r), nil
	}
	return errorResponse(500, refusal.CodeInternal, "unexpected outcome "+out.Kind.String()), nil
}

// refused is a refusal as a JSON error response, with its retry-after.
func refused(r refusal.Refusal) response {
	resp := errorResponse(r.Status, r.Code, r.Message)
	if pairs := r.Header(); pairs != nil {
		resp.Header[pairs[0]] = []string{pairs[1]}
	}
	return resp
}

// errorResponse is a JSON error response: {"error": {"code", "message"}}, content-type
// application/json.
func errorResponse(status int, code, message string) response {
	body, _ := json.Marshal(apigw.ErrorBody{Error: apigw.ErrorDetail{Code: code, Message: message}})
	return response{Status: status, Header: map[string][]string{"content-type": {"application/json"}}, Body: body}
}

// flatten turns a header into the core's one-value-per-name form. A newline can appear in no
// header value (RFC 9110), so it separates the values of a repeated header, set-cookie included,
// and unflatten restores them exactly.
func flatten(h map[string][]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for name, values := range h {
		out[strings.ToLower(name)] = strings.Join(values, "\n")
	}
	return out
}

func unflatten(h map[string]string) map[string][]string {
	out := make(map[string][]string, len(h)+1)
	for name, value := range h {
		out[name] = strings.Split(value, "\n")
	}
	return out
}
