package idemhttp

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/refusal"
)

// The Lambda event types each adapter takes and returns.
type (
	restRequest  = events.APIGatewayProxyRequest
	restResponse = events.APIGatewayProxyResponse
	v2Request    = events.APIGatewayV2HTTPRequest
	v2Response   = events.APIGatewayV2HTTPResponse
	urlRequest   = events.LambdaFunctionURLRequest
	urlResponse  = events.LambdaFunctionURLResponse
	albRequest   = events.ALBTargetGroupRequest
	albResponse  = events.ALBTargetGroupResponse
)

// APIGatewayProxy returns h guarded by m, for API Gateway REST APIs (Lambda proxy integration,
// payload v1.0). An error from h releases the claim and is returned as h returned it.
func APIGatewayProxy(m *Middleware, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return adapt(m, h, codec[restRequest, restResponse]{
		request: func(e restRequest) message {
			return message{e.HTTPMethod, e.Path, e.Headers, e.MultiValueHeaders, nil, e.Body, e.IsBase64Encoded}
		},
		response: func(r restResponse) (int, message) {
			return r.StatusCode, message{"", "", r.Headers, r.MultiValueHeaders, nil, r.Body, r.IsBase64Encoded}
		},
		reply: func(_ restRequest, status int, a message) restResponse {
			return restResponse{StatusCode: status, Headers: a.single, MultiValueHeaders: a.multi, Body: a.body, IsBase64Encoded: a.base64}
		},
	})
}

// HTTPAPI returns h guarded by m, for API Gateway HTTP APIs (payload v2.0). An error from h
// releases the claim and is returned as h returned it.
func HTTPAPI(m *Middleware, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return adapt(m, h, codec[v2Request, v2Response]{
		request: func(e v2Request) message {
			return message{e.RequestContext.HTTP.Method, e.RawPath, e.Headers, nil, e.Cookies, e.Body, e.IsBase64Encoded}
		},
		response: func(r v2Response) (int, message) {
			return r.StatusCode, message{"", "", r.Headers, r.MultiValueHeaders, r.Cookies, r.Body, r.IsBase64Encoded}
		},
		reply: func(_ v2Request, status int, a message) v2Response {
			return v2Response{StatusCode: status, Headers: a.single, Cookies: a.cookies, Body: a.body, IsBase64Encoded: a.base64}
		},
		cookies: true,
	})
}

// FunctionURL returns h guarded by m, for Lambda function URLs. An error from h releases the
// claim and is returned as h returned it.
func FunctionURL(m *Middleware, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)) func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return adapt(m, h, codec[urlRequest, urlResponse]{
		request: func(e urlRequest) message {
			return message{e.RequestContext.HTTP.Method, e.RawPath, e.Headers, nil, e.Cookies, e.Body, e.IsBase64Encoded}
		},
		response: func(r urlResponse) (int, message) {
			return r.StatusCode, message{"", "", r.Headers, nil, r.Cookies, r.Body, r.IsBase64Encoded}
		},
		reply: func(_ urlRequest, status int, a message) urlResponse {
			return urlResponse{StatusCode: status, Headers: a.single, Cookies: a.cookies, Body: a.body, IsBase64Encoded: a.base64}
		},
		cookies: true,
	})
}

// ALB returns h guarded by m, for Application Load Balancer targets. When the target group
// sends multi-value headers, the answers use them too, as the load balancer requires. An error
// from h releases the claim and is returned as h returned it.
func ALB(m *Middleware, h func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error)) func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
	return adapt(m, h, codec[albRequest, albResponse]{
		request: func(e albRequest) message {
			return message{e.HTTPMethod, e.Path, e.Headers, e.MultiValueHeaders, nil, e.Body, e.IsBase64Encoded}
		},
		response: func(r albResponse) (int, message) {
			return r.StatusCode, message{"", "", r.Headers, r.MultiValueHeaders, nil, r.Body, r.IsBase64Encoded}
		},
		reply: func(_ albRequest, status int, a message) albResponse {
			return albResponse{StatusCode: status, StatusDescription: fmt.Sprintf("%d %s", status, http.StatusText(status)),
				Headers: a.single, MultiValueHeaders: a.multi, Body: a.body, IsBase64Encoded: a.base64}
		},
		multiOnly: func(e albRequest) bool { return len(e.MultiValueHeaders) > 0 },
	})
}

// message is the part of a request or response event the middleware reads or writes; requests
// carry a method and a path, responses do not.
type message struct {
	method, path string
	single       map[string]string
	multi        map[string][]string
	cookies      []string
	body         string
	base64       bool
}

// codec says how to read one event type's requests and responses and how to write its answers.
type codec[Req, Resp any] struct {
	request  func(Req) message
	response func(Resp) (status int, _ message)
	reply    func(_ Req, status int, _ message) Resp
	// cookies: the answer carries set-cookie as cookies and joins other repeated headers
	// (payload v2.0, function URLs); else repeated headers are multi-value headers.
	cookies bool
	// multiOnly reports a request whose answer must hold multi-value headers only (an ALB
	// target group with multi-value headers on); nil means never.
	multiOnly func(Req) bool
}

// adapt is the one path of every Lambda adapter: read the event, serve it, answer in kind.
// When the method is not guarded, h's response is returned untouched.
func adapt[Req, Resp any](m *Middleware, h func(context.Context, Req) (Resp, error), c codec[Req, Resp]) func(context.Context, Req) (Resp, error) {
	return func(ctx context.Context, ev Req) (Resp, error) {
		in := c.request(ev)
		if !m.guards(in.method) {
			return h(ctx, ev)
		}
		var out Resp
		next := func(ctx context.Context) (response, error) {
			r, err := h(ctx, ev)
			if err != nil {
				return response{}, err
			}
			out = r
			return fromEvent(c.response(r))
		}
		raw := []byte(in.body)
		if in.base64 {
			var err error
			if raw, err = base64.StdEncoding.DecodeString(in.body); err != nil {
				return c.answer(ev, errorResponse(400, refusal.CodeInvalidRequest, "body: not valid base64")), nil
			}
		}
		resp, err := m.serve(ctx, &Request{Method: in.method, Path: in.path, Header: requestHeader(in), Body: raw, Event: ev}, next)
		if err != nil {
			return out, err
		}
		return c.answer(ev, resp), nil
	}
}

// answer writes resp as the event response to ev.
func (c codec[Req, Resp]) answer(ev Req, resp response) Resp {
	var a message
	a.body, a.base64 = encodeBody(resp.Body)
	if c.cookies {
		a.single, a.cookies = joined(resp.Header)
	} else {
		a.single, a.multi = split(resp.Header, c.multiOnly != nil && c.multiOnly(ev))
	}
	return c.reply(ev, resp.Status, a)
}

// requestHeader returns an event's request headers as an http.Header.
func requestHeader(in message) http.Header {
	h := make(http.Header, len(in.single)+len(in.multi)+1)
	values := make([]string, len(in.single)) // one backing array for the single values
	i := 0
	for name, v := range in.single {
		values[i] = v
		h[textproto.CanonicalMIMEHeaderKey(name)] = values[i : i+1 : i+1]
		i++
	}
	for name, vs := range in.multi {
		h.Del(name)
		for _, v := range vs {
			h.Add(name, v)
		}
	}
	if len(in.cookies) > 0 {
		h.Set("Cookie", strings.Join(in.cookies, "; "))
	}
	return h
}

// fromEvent turns an event response into a Response.
func fromEvent(status int, r message) (response, error) {
	h := make(map[string][]string, len(r.single)+len(r.multi)+1)
	for name, v := range r.single {
		h[strings.ToLower(name)] = []string{v}
	}
	for name, vs := range r.multi {
		h[strings.ToLower(name)] = vs
	}
	if len(r.cookies) > 0 {
		h["set-cookie"] = append(h["set-cookie"], r.cookies...)
	}
	raw := []byte(r.body)
	if r.base64 {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(r.body); err != nil {
			return response{}, fmt.Errorf("idemhttp: the handler's response body is not valid base64: %w", err)
		}
	}
	return response{Status: status, Header: h, Body: raw}, nil
}

// encodeBody returns a body for an event response: as text when it is UTF-8, else base64.
func encodeBody(b []byte) (string, bool) {
	if utf8.Valid(b) {
		return string(b), false
	}
	return base64.StdEncoding.EncodeToString(b), true
}

// split returns h as single-value headers, and repeated ones as multi-value headers; with
// allMulti, every header is multi-value (what an ALB with multi-value headers expects).
func split(h map[string][]string, allMulti bool) (map[string]string, map[string][]string) {
	single := make(map[string]string, len(h))
	var multi map[string][]string
	for name, vs := range h {
		if len(vs) == 1 && !allMulti {
			single[name] = vs[0]
			continue
		}
		if multi == nil {
			multi = make(map[string][]string)
		}
		multi[name] = vs
	}
	if allMulti {
		single = nil
	}
	return single, multi
}

// joined returns h as the headers and cookies of a payload v2.0 response: set-cookie values
// as cookies, other repeated headers joined with commas (RFC 9110).
func joined(h map[string][]string) (map[string]string, []string) {
	out := make(map[string]string, len(h))
	var cookies []string
	for name, vs := range h {
		if name == "set-cookie" {
			cookies = vs
			continue
		}
		out[name] = strings.Join(vs, ", ")
	}
	return out, cookies
}
