// Package gateway is a local stand-in for an API Gateway HTTP API with Lambda proxy
// integrations (payload format 2.0): it matches each HTTP request against the routes of a SAM
// template, turns it into the events.APIGatewayV2HTTPRequest the gateway would send, invokes
// the route's handler in-process with the function's timeout as its deadline, and writes the
// events.APIGatewayV2HTTPResponse back as the gateway would.
//
// Routes are matched by net/http's ServeMux, whose precedence is the gateway's for the routes
// a template declares: a literal segment before a {name} parameter, a route's own method before
// ANY. What the gateway itself answers is answered the same way here: a request no route matches gets 404
// {"message":"Not Found"}; a handler that returns an error, panics, runs past its timeout or
// returns a malformed response gets 500 {"message":"Internal Server Error"}; a body over the
// gateway's 10 MB payload quota gets 413 {"message":"Request Entity Too Large"}.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/samtemplate"
)

// MaxBody is the largest request body accepted: API Gateway's 10 MB payload quota.
const MaxBody = 10 << 20

// Handler is a Lambda handler for HTTP API payload v2.0 events, such as the Handle method of
// this repository's function handlers.
type Handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Function is one Lambda function behind the gateway: the template's function, whose Routes it
// serves and whose Timeout is the deadline of each invocation (after which the gateway answers
// 500, as when Lambda ends a timed-out invocation), and its handler.
type Function struct {
	samtemplate.Function
	Handler Handler
}

// Gateway serves routes by invoking their functions. It is an http.Handler, safe for
// concurrent use; every request is one invocation, run concurrently with the others, as
// Lambda runs concurrent requests in separate execution environments.
type Gateway struct {
	mux    *http.ServeMux // matches only: the pattern found names the route
	routes map[string]route
	log    io.Writer
}

type route struct {
	samtemplate.Route
	fn Function
}

// New returns a gateway serving the routes of functions, that writes one access line per
// request to log (method, path, function, status, duration). It is an error for two routes to
// serve the same requests.
func New(functions []Function, log io.Writer) (*Gateway, error) {
	g := &Gateway{mux: http.NewServeMux(), routes: map[string]route{}, log: log}
	for _, f := range functions {
		for _, r := range f.Routes {
			pattern := strings.TrimPrefix(r.Method+" ", "ANY ") + r.Path
			if err := register(g.mux, pattern); err != nil {
				return nil, fmt.Errorf("gateway: route %s of %s: %v", r.Key(), f.LogicalID, err)
			}
			g.routes[pattern] = route{r, f}
		}
	}
	return g, nil
}

// register adds pattern to mux, turning ServeMux's panic for a malformed or conflicting pattern
// into an error.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return nil
}

// gatewayError writes one of the gateway's own JSON answers and returns its status.
func gatewayError(w http.ResponseWriter, status int) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"message\":%q}", http.StatusText(status))
	return status
}

// ServeHTTP serves one request as API Gateway would.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never fails
	requestID := RequestID(seed)
	w.Header().Set("Apigw-Requestid", requestID)
	status, target := 0, "-"
	defer func() {
		fmt.Fprintf(g.log, "%s %s -> %s %d %s\n", received.Format("15:04:05.000"), bounded(r.Method+" "+r.URL.RequestURI(), maxLogged),
			target, status, time.Since(received).Round(10*time.Microsecond))
	}()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			status = gatewayError(w, http.StatusRequestEntityTooLarge)
		} else {
			status = gatewayError(w, http.StatusBadRequest)
		}
		return
	}
	_, pattern := g.mux.Handler(r)
	rt, ok := g.routes[pattern]
	params, matched := PathParameters(rt.Route, r.URL.EscapedPath())
	if !ok || !matched { // matched is false for a path ServeMux would clean first
		status = gatewayError(w, http.StatusNotFound)
		return
	}
	target = rt.fn.LogicalID
	ev := NewEvent(r, body, events.APIGatewayV2HTTPRequest{RouteKey: rt.Key(), PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: requestID, TimeEpoch: received.UnixMilli()}})
	resp, err := invoke(r.Context(), rt.fn, ev)
	if err == nil {
		status, err = writeResponse(w, resp)
	} else {
		status = gatewayError(w, http.StatusInternalServerError)
	}
	if err != nil {
		fmt.Fprintf(g.log, "%s %s: %v\n", rt.fn.LogicalID, requestID, err)
	}
}

// maxLogged bounds what the access line copies from a request: a client chooses the method and
// the URL, and a 500 KB path must not make a 500 KB line.
const maxLogged = 512

// bounded returns s cut to at most max bytes, with the number of bytes left out, and with
// control characters (a newline would forge a line) written as "?".
func bounded(s string, max int) string {
	cut := ""
	if len(s) > max {
		s, cut = s[:max], fmt.Sprintf("...(%d more bytes)", len(s)-max)
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s) + cut
}

// ErrTimeout is returned by an invocation that outlived its function's timeout.
var ErrTimeout = errors.New("gateway: task timed out")

// invoke runs one invocation of fn. Its context ends at the function's timeout; it is not
// cancelled when the client goes away, since Lambda does not stop an invocation for that either.
// Past the timeout the invocation is abandoned, as Lambda would stop it, and ErrTimeout returned.
// (No function reads a Lambda context, so none is added.)
func invoke(parent context.Context, fn Function, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), fn.Timeout)
	defer cancel()
	var resp events.APIGatewayV2HTTPResponse
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("gateway: %s panicked: %v", fn.LogicalID, v)
			}
		}()
		var err error
		if resp, err = fn.Handler(ctx, ev); err != nil {
			err = fmt.Errorf("gateway: %s returned an error: %w", fn.LogicalID, err)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return resp, err
	case <-ctx.Done():
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("%w after %.2f seconds", ErrTimeout, fn.Timeout.Seconds())
	}
}

// writeResponse writes a handler's response as the gateway does for payload 2.0: the status,
// the headers (multiValueHeaders is no part of that format), one Set-Cookie per cookie, and the
// body, base64-decoded when isBase64Encoded is set. A status outside 100-599 or a body that is
// not the base64 it claims to be is a malformed response, answered with 500. It returns the
// status written.
func writeResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) (int, error) {
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		return gatewayError(w, http.StatusInternalServerError), fmt.Errorf("gateway: malformed response: status %d", resp.StatusCode)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return gatewayError(w, http.StatusInternalServerError), fmt.Errorf("gateway: malformed response: body is not base64: %w", err)
		}
	}
	h := w.Header()
	for k, v := range resp.Headers {
		h.Set(k, v)
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
