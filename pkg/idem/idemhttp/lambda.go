package idemhttp

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// APIGatewayProxy returns h guarded by m, for API Gateway REST APIs (Lambda proxy integration,
// payload v1.0). An error from h releases the claim and is returned as h returned it.
func APIGatewayProxy(m *Middleware, h func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		var out events.APIGatewayProxyResponse
		resp, err := m.serveEvent(ctx, ev, ev.HTTPMethod, ev.Path, ev.Headers, ev.MultiValueHeaders, nil, ev.Body, ev.IsBase64Encoded,
			func(ctx context.Context) (Response, error) {
				r, err := h(ctx, ev)
				if err != nil {
					return Response{}, err
				}
				out = r
				return fromEvent(r.StatusCode, r.Headers, r.MultiValueHeaders, nil, r.Body, r.IsBase64Encoded)
			})
		if err != nil || resp == nil {
			return out, err
		}
		single, multi := split(resp.Header, false)
		body, b64 := encodeBody(resp.Body)
		return events.APIGatewayProxyResponse{StatusCode: resp.Status, Headers: single, MultiValueHeaders: multi, Body: body, IsBase64Encoded: b64}, nil
	}
}

// HTTPAPI returns h guarded by m, for API Gateway HTTP APIs (payload v2.0). An error from h
// releases the claim and is returned as h returned it.
func HTTPAPI(m *Middleware, h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		var out events.APIGatewayV2HTTPResponse
		resp, err := m.serveEvent(ctx, ev, ev.RequestContext.HTTP.Method, ev.RawPath, ev.Headers, nil, ev.Cookies, ev.Body, ev.IsBase64Encoded,
			func(ctx context.Context) (Response, error) {
				r, err := h(ctx, ev)
				if err != nil {
					return Response{}, err
				}
				out = r
				return fromEvent(r.StatusCode, r.Headers, r.MultiValueHeaders, r.Cookies, r.Body, r.IsBase64Encoded)
			})
		if err != nil || resp == nil {
			return out, err
		}
		headers, cookies := joined(resp.Header)
		body, b64 := encodeBody(resp.Body)
		return events.APIGatewayV2HTTPResponse{StatusCode: resp.Status, Headers: headers, Cookies: cookies, Body: body, IsBase64Encoded: b64}, nil
	}
}

// FunctionURL returns h guarded by m, for Lambda function URLs. An error from h releases the
// claim and is returned as h returned it.
func FunctionURL(m *Middleware, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)) func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		var out events.LambdaFunctionURLResponse
		resp, err := m.serveEvent(ctx, ev, ev.RequestContext.HTTP.Method, ev.RawPath, ev.Headers, nil, ev.Cookies, ev.Body, ev.IsBase64Encoded,
			func(ctx context.Context) (Response, error) {
				r, err := h(ctx, ev)
				if err != nil {
					return Response{}, err
				}
				out = r
				return fromEvent(r.StatusCode, r.Headers, nil, r.Cookies, r.Body, r.IsBase64Encoded)
			})
		if err != nil || resp == nil {
			return out, err
		}
		headers, cookies := joined(resp.Header)
		body, b64 := encodeBody(resp.Body)
		return events.LambdaFunctionURLResponse{StatusCode: resp.Status, Headers: headers, Cookies: cookies, Body: body, IsBase64Encoded: b64}, nil
	}
}

// ALB returns h guarded by m, for Application Load Balancer targets. When the target group
// sends multi-value headers, the answers use them too, as the load balancer requires. An error
// from h releases the claim and is returned as h returned it.
func ALB(m *Middleware, h func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error)) func(context.Context, events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
	return func(ctx context.Context, ev events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		var out events.ALBTargetGroupResponse
		resp, err := m.serveEvent(ctx, ev, ev.HTTPMethod, ev.Path, ev.Headers, ev.MultiValueHeaders, nil, ev.Body, ev.IsBase64Encoded,
			func(ctx context.Context) (Response, error) {
				r, err := h(ctx, ev)
				if err != nil {
					return Response{}, err
				}
				out = r
				return fromEvent(r.StatusCode, r.Headers, r.MultiValueHeaders, nil, r.Body, r.IsBase64Encoded)
			})
		if err != nil || resp == nil {
			return out, err
		}
		single, multi := split(resp.Header, len(ev.MultiValueHeaders) > 0)
		body, b64 := encodeBody(resp.Body)
		return events.ALBTargetGroupResponse{StatusCode: resp.Status, StatusDescription: fmt.Sprintf("%d %s", resp.Status, http.StatusText(resp.Status)),
			Headers: single, MultiValueHeaders: multi, Body: body, IsBase64Encoded: b64}, nil
	}
}

// serveEvent is serve for a Lambda event. A nil response with a nil error means next's own
// response (which the caller kept) is the answer, unchanged.
func (m *Middleware) serveEvent(ctx context.Context, ev any, method, path string, single map[string]string, multi map[string][]string,
	cookies []string, body string, b64 bool, next func(context.Context) (Response, error)) (*Response, error) {
	if !m.guards(method) {
		_, err := next(ctx)
		return nil, err
	}
	raw := []byte(body)
	if b64 {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(body); err != nil {
			r := refusal(400, CodeInvalidRequest, "body: not valid base64")
			return &r, nil
		}
	}
	h := http.Header{}
	for name, v := range single {
		h.Set(name, v)
	}
	for name, vs := range multi {
		h.Del(name)
		for _, v := range vs {
			h.Add(name, v)
		}
	}
	if len(cookies) > 0 {
		h.Set("Cookie", strings.Join(cookies, "; "))
	}
	resp, err := m.serve(ctx, &Request{Method: method, Path: path, Header: h, Body: raw, Event: ev}, next)
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

// fromEvent turns an event response into a Response.
func fromEvent(status int, single map[string]string, multi map[string][]string, cookies []string, body string, b64 bool) (Response, error) {
	h := make(map[string][]string, len(single)+len(multi)+1)
	for name, v := range single {
		h[strings.ToLower(name)] = []string{v}
	}
	for name, vs := range multi {
		h[strings.ToLower(name)] = vs
	}
	if len(cookies) > 0 {
		h["set-cookie"] = append(h["set-cookie"], cookies...)
	}
	raw := []byte(body)
	if b64 {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(body); err != nil {
			return Response{}, fmt.Errorf("idemhttp: the handler's response body is not valid base64: %w", err)
		}
	}
	return Response{Status: status, Header: h, Body: raw}, nil
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
