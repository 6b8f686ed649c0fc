// Package gateway is a local stand-in for an API Gateway HTTP API with Lambda proxy
// integrations (payload format 2.0): it matches each HTTP request against the routes of a SAM
// template, turns it into the events.APIGatewayV2HTTPRequest the gateway would send, invokes
// the route's handler in-process with the function's timeout as its deadline, and writes the
// events.APIGatewayV2HTTPResponse back as the gateway would.
//
// What the gateway itself answers is answered the same way here: a request no route matches
// gets 404 {"message":"Not Found"}; a handler that returns an error, panics, runs past its
// timeout or returns a malformed response gets 500 {"message":"Internal Server Error"}; a
// body over the gateway's 10 MB payload quota gets 413 {"message":"Request Entity Too Large"}.
package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemlambda/idem/internal/samtemplate"
)

// MaxBody is the largest request body accepted: API Gateway's 10 MB payload quota.
const MaxBody = 10 << 20

// DefaultAPIID is the apiId of local events unless WithAPIID says otherwise.
const DefaultAPIID = "localapi00"

// Handler is a Lambda handler for HTTP API payload v2.0 events, such as the Handle method of
// this repository's function handlers.
type Handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Function is one Lambda function behind the gateway.
type Function struct {
	// Name is the function's logical ID in the template.
	Name string
	// Timeout is the function's Timeout: the deadline of each invocation's context, after
	// which the gateway answers 500 as it does when Lambda ends a timed-out invocation.
	Timeout time.Duration
	// Handler runs one invocation.
	Handler Handler
}

// Option changes a Gateway's defaults.
type Option func(*Gateway)

// WithLog sends one line per request (method, path, route, function, status, duration) to w.
// Default os.Stderr; nil discards them.
func WithLog(w io.Writer) Option { return func(g *Gateway) { g.log = w } }

// WithClock replaces time.Now for the events' time and timeEpoch. Default time.Now.
func WithClock(now func() time.Time) Option { return func(g *Gateway) { g.now = now } }

// WithAPIID sets the events' apiId. Default DefaultAPIID.
func WithAPIID(id string) Option { return func(g *Gateway) { g.apiID = id } }

// Gateway serves routes by invoking their functions. It is an http.Handler, safe for
// concurrent use; every request is one invocation, run concurrently with the others, as
// Lambda runs concurrent requests in separate execution environments.
type Gateway struct {
	routes    []compiledRoute
	functions map[string]Function
	log       io.Writer
	now       func() time.Time
	apiID     string
}

// New returns a gateway serving routes, each invoking the function of functions named by its
// Function field. It is an error for a route to name a function that is not given.
func New(routes []samtemplate.Route, functions []Function, opts ...Option) (*Gateway, error) {
	g := &Gateway{functions: map[string]Function{}, log: os.Stderr, now: time.Now, apiID: DefaultAPIID}
	for _, o := range opts {
		o(g)
	}
	if g.log == nil {
		g.log = io.Discard
	}
	for _, f := range functions {
		if f.Handler == nil || f.Timeout <= 0 {
			return nil, fmt.Errorf("gateway: function %s: needs a handler and a positive timeout", f.Name)
		}
		g.functions[f.Name] = f
	}
	for _, r := range routes {
		if _, ok := g.functions[r.Function]; !ok {
			return nil, fmt.Errorf("gateway: route %s: no function %s", r.Key(), r.Function)
		}
		c, err := compile(r)
		if err != nil {
			return nil, err
		}
		g.routes = append(g.routes, c)
	}
	return g, nil
}

// Match returns the route that serves method on the (escaped) path and its path parameters,
// or false when none does.
func (g *Gateway) Match(method, escapedPath string) (samtemplate.Route, map[string]string, bool) {
	var best *compiledRoute
	var bestParams map[string]string
	for i := range g.routes {
		params, ok := g.routes[i].match(method, escapedPath)
		if ok && (best == nil || g.routes[i].better(*best)) {
			best, bestParams = &g.routes[i], params
		}
	}
	if best == nil {
		return samtemplate.Route{}, nil, false
	}
	return best.Route, bestParams, true
}

// gatewayError writes one of the gateway's own JSON answers.
func gatewayError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"message\":%q}", message)
}

// ServeHTTP serves one request as API Gateway would.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	received := g.now()
	requestID := NewRequestID()
	w.Header().Set("Apigw-Requestid", requestID)
	status, target := 0, "-"
	defer func() {
		fmt.Fprintf(g.log, "%s %s %s -> %s %d %s\n", start.Format("15:04:05.000"), bounded(r.Method, maxLoggedMethod), bounded(r.URL.RequestURI(), maxLoggedURI),
			target, status, time.Since(start).Round(10*time.Microsecond))
	}()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			status = http.StatusRequestEntityTooLarge
			gatewayError(w, status, "Request Entity Too Large")
			return
		}
		status = http.StatusBadRequest
		gatewayError(w, status, "Bad Request")
		return
	}

	route, params, ok := g.Match(r.Method, r.URL.EscapedPath())
	if !ok {
		status = http.StatusNotFound
		gatewayError(w, status, "Not Found")
		return
	}
	fn := g.functions[route.Function]
	target = fn.Name
	ev := NewEvent(r, body, EventInput{
		RouteKey:       route.Key(),
		PathParameters: params,
		APIID:          g.apiID,
		RequestID:      requestID,
		Time:           received,
	})
	resp, err := g.invoke(r.Context(), fn, ev)
	if err != nil {
		fmt.Fprintf(g.log, "%s %s: %v\n", fn.Name, requestID, err)
		status = http.StatusInternalServerError
		gatewayError(w, status, "Internal Server Error")
		return
	}
	status, err = WriteResponse(w, resp)
	if err != nil {
		fmt.Fprintf(g.log, "%s %s: %v\n", fn.Name, requestID, err)
	}
}

// Bounds of what the access line copies from a request: a client chooses the URL, and a 500 KB
// path must not make a 500 KB line.
const (
	maxLoggedURI    = 512
	maxLoggedMethod = 16
)

// bounded returns s cut to at most max bytes, with the number of bytes left out, and with
// control characters (a newline would forge a line) written as %XX.
func bounded(s string, max int) string {
	cut := ""
	if len(s) > max {
		cut = fmt.Sprintf("...(%d more bytes)", len(s)-max)
		s = s[:max]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String() + cut
}

// ErrTimeout is returned by an invocation that outlived its function's timeout.
var ErrTimeout = errors.New("gateway: task timed out")

// result is what one invocation returned.
type result struct {
	resp events.APIGatewayV2HTTPResponse
	err  error
}

// invoke runs one invocation of fn. Its context carries a Lambda context (request ID and
// function ARN) and ends at the function's timeout; it is not cancelled when the client goes
// away, since Lambda does not stop an invocation for that either. Past the timeout the
// invocation is abandoned, as Lambda would stop it, and ErrTimeout returned.
func (g *Gateway) invoke(parent context.Context, fn Function, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), fn.Timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       newUUID(),
		InvokedFunctionArn: "arn:aws:lambda:us-east-1:" + AccountID + ":function:" + fn.Name,
	})
	done := make(chan result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- result{err: fmt.Errorf("gateway: %s panicked: %v", fn.Name, v)}
			}
		}()
		resp, err := fn.Handler(ctx, ev)
		done <- result{resp: resp, err: err}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			return res.resp, fmt.Errorf("gateway: %s returned an error: %w", fn.Name, res.err)
		}
		return res.resp, nil
	case <-ctx.Done():
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("%w after %.2f seconds", ErrTimeout, fn.Timeout.Seconds())
	}
}

// WriteResponse writes a handler's response as the gateway does: the status, the headers
// (and multi-value headers), one Set-Cookie per cookie, and the body, base64-decoded when
// isBase64Encoded is set. A status outside 100-599 or a body that is not the base64 it claims
// to be is a malformed response, answered with 500 as the gateway answers it. It returns the
// status written.
func WriteResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) (int, error) {
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
		return http.StatusInternalServerError, fmt.Errorf("gateway: malformed response: status %d", resp.StatusCode)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			gatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return http.StatusInternalServerError, fmt.Errorf("gateway: malformed response: body is not base64: %w", err)
		}
	}
	h := w.Header()
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := w.Write(body); err != nil {
		return resp.StatusCode, fmt.Errorf("gateway: write response: %w", err)
	}
	return resp.StatusCode, nil
}
