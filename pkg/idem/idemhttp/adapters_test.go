package idemhttp_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// call is one HTTP request, whichever adapter carries it.
type call struct {
	method, path string
	header       map[string]string
	body         string
}

// answer is what came back: lower-case header names; err is a Lambda handler's error.
type answer struct {
	status int
	header map[string][]string
	body   string
	err    error
}

func (a answer) get(name string) string {
	if v := a.header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// app is the business handler behind every adapter.
type app func(ctx context.Context, c call) (status int, header map[string][]string, body string, err error)

// adapter puts app behind m with one entry point of idemhttp and returns a way to call it
// end to end with that entry point's own request and response types.
type adapter struct {
	name  string
	build func(t *testing.T, m *idemhttp.Middleware, a app) func(call) answer
}

var adapters = []adapter{
	{"net/http", buildNetHTTP},
	{"rest-v1", buildV1},
	{"httpapi-v2", buildV2},
	{"function-url", buildFunctionURL},
	{"alb", buildALB},
}

func lower(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}

func buildNetHTTP(t *testing.T, m *idemhttp.Middleware, a app) func(call) answer {
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := map[string]string{}
		for name := range r.Header {
			h[strings.ToLower(name)] = r.Header.Get(name)
		}
		status, header, out, err := a(r.Context(), call{method: r.Method, path: r.URL.Path, header: h, body: string(body)})
		if err != nil {
			status, header, out = 500, nil, `{"error":"handler"}`
		}
		for name, vs := range header {
			for _, v := range vs {
				w.Header().Add(name, v)
			}
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	})))
	t.Cleanup(srv.Close)
	return func(c call) answer {
		req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			return answer{err: err}
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		h := map[string][]string{}
		for name, vs := range resp.Header {
			h[strings.ToLower(name)] = vs
		}
		return answer{status: resp.StatusCode, header: h, body: string(body)}
	}
}

// splitHeader sorts a header map into single values, multiple values and cookies; set-cookie goes both to multi and to cookies, for the event types that use either.
func splitHeader(header map[string][]string) (single map[string]string, multi map[string][]string, cookies []string) {
	single, multi = map[string]string{}, map[string][]string{}
	for name, vs := range header {
		switch {
		case name == "set-cookie":
			cookies = vs
			multi[name] = vs
		case len(vs) == 1:
			single[name] = vs[0]
		default:
			multi[name] = vs
		}
	}
	return single, multi, cookies
}

func toAnswer(status int, single map[string]string, multi map[string][]string, cookies []string, body string, b64 bool, err error) answer {
	if err != nil {
		return answer{err: err}
	}
	h := map[string][]string{}
	for k, v := range single {
		h[strings.ToLower(k)] = []string{v}
	}
	for k, vs := range multi {
		h[strings.ToLower(k)] = vs
	}
	if len(cookies) > 0 {
		h["set-cookie"] = cookies
	}
	if b64 {
		raw, derr := base64.StdEncoding.DecodeString(body)
		if derr != nil {
			return answer{err: derr}
		}
		body = string(raw)
	}
	return answer{status: status, header: h, body: body}
}

func buildV1(t *testing.T, m *idemhttp.Middleware, a app) func(call) answer {
	h := idemhttp.APIGatewayProxy(m, func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		status, header, body, err := a(ctx, call{method: ev.HTTPMethod, path: ev.Path, header: lower(ev.Headers), body: ev.Body})
		if err != nil {
			return events.APIGatewayProxyResponse{}, err
		}
		single, multi, _ := splitHeader(header)
		return events.APIGatewayProxyResponse{StatusCode: status, Headers: single, MultiValueHeaders: multi, Body: body}, nil
	})
	return func(c call) answer {
		r, err := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: c.method, Path: c.path, Headers: c.header, Body: c.body})
		return toAnswer(r.StatusCode, r.Headers, r.MultiValueHeaders, nil, r.Body, r.IsBase64Encoded, err)
	}
}

// buildV2 sends every body base64-encoded, as API Gateway does for binary media.
func buildV2(t *testing.T, m *idemhttp.Middleware, a app) func(call) answer {
	h := idemhttp.HTTPAPI(m, func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		raw, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		status, header, body, err := a(ctx, call{method: ev.RequestContext.HTTP.Method, path: ev.RawPath, header: ev.Headers, body: string(raw)})
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		single, _, cookies := splitHeader(header)
		return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: single, Cookies: cookies, Body: body}, nil
	})
	return func(c call) answer {
		ev := events.APIGatewayV2HTTPRequest{RawPath: c.path, Headers: lower(c.header), IsBase64Encoded: true,
			Body: base64.StdEncoding.EncodeToString([]byte(c.body))}
		ev.RequestContext.HTTP.Method = c.method
		r, err := h(context.Background(), ev)
		return toAnswer(r.StatusCode, r.Headers, nil, r.Cookies, r.Body, r.IsBase64Encoded, err)
	}
}

func buildFunctionURL(t *testing.T, m *idemhttp.Middleware, a app) func(call) answer {
	h := idemhttp.FunctionURL(m, func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		status, header, body, err := a(ctx, call{method: ev.RequestContext.HTTP.Method, path: ev.RawPath, header: ev.Headers, body: ev.Body})
		if err != nil {
			return events.LambdaFunctionURLResponse{}, err
		}
		single, _, cookies := splitHeader(header)
		return events.LambdaFunctionURLResponse{StatusCode: status, Headers: single, Cookies: cookies, Body: body}, nil
	})
	return func(c call) answer {
		ev := events.LambdaFunctionURLRequest{RawPath: c.path, Headers: lower(c.header), Body: c.body}
		ev.RequestContext.HTTP.Method = c.method
		r, err := h(context.Background(), ev)
		return toAnswer(r.StatusCode, r.Headers, nil, r.Cookies, r.Body, r.IsBase64Encoded, err)
	}
}

// buildALB uses a target group with multi-value headers, so answers must use them too.
func buildALB(t *testing.T, m *idemhttp.Middleware, a app) func(call) answer {
	h := idemhttp.ALB(m, func(ctx context.Context, ev events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		hdr := map[string]string{}
		for k, vs := range ev.MultiValueHeaders {
			hdr[strings.ToLower(k)] = vs[0]
		}
		status, header, body, err := a(ctx, call{method: ev.HTTPMethod, path: ev.Path, header: hdr, body: ev.Body})
		if err != nil {
			return events.ALBTargetGroupResponse{}, err
		}
		return events.ALBTargetGroupResponse{StatusCode: status, StatusDescription: fmt.Sprintf("%d %s", status, http.StatusText(status)),
			MultiValueHeaders: header, Body: body}, nil
	})
	return func(c call) answer {
		multi := map[string][]string{"host": {"alb.example"}} // a load balancer always sends some
		for k, v := range c.header {
			multi[strings.ToLower(k)] = []string{v}
		}
		r, err := h(context.Background(), events.ALBTargetGroupRequest{HTTPMethod: c.method, Path: c.path, MultiValueHeaders: multi, Body: c.body})
		if err == nil && len(r.Headers) > 0 {
			return answer{err: errors.New("ALB answer in multi-value mode carries single-value headers")}
		}
		if want := fmt.Sprintf("%d %s", r.StatusCode, http.StatusText(r.StatusCode)); err == nil && r.StatusDescription != want {
			return answer{err: errors.New("ALB answer lacks its status description: " + r.StatusDescription)}
		}
		return toAnswer(r.StatusCode, r.Headers, r.MultiValueHeaders, nil, r.Body, r.IsBase64Encoded, err)
	}
}
