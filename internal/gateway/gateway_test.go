package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/gateway"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/internal/testsupport"
)

// recorder is a handler that keeps the last event and answers with what respond returns.
type recorder struct {
	events  chan events.APIGatewayV2HTTPRequest
	respond func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
}

func newRecorder(respond func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)) *recorder {
	return &recorder{events: make(chan events.APIGatewayV2HTTPRequest, 16), respond: respond}
}

func (r *recorder) handle(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r.events <- ev
	return r.respond(ctx, ev)
}

func ok(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{}`, Headers: map[string]string{"content-type": "application/json"}}, nil
}

// echo answers with the request body, base64-encoded as a binary response is.
func echo(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode:      200,
		Headers:         map[string]string{"content-type": "application/octet-stream"},
		Body:            base64.StdEncoding.EncodeToString(body),
		IsBase64Encoded: true,
	}, nil
}

func route(fn, method, path string) samtemplate.Route {
	return samtemplate.Route{Function: fn, Method: method, Path: path}
}

// function is a gateway function without its routes, which newGateway gives it.
type function struct {
	Name    string
	Timeout time.Duration
	Handler gateway.Handler
}

// newGateway returns the gateway of fns, each serving the routes that name it.
func newGateway(routes []samtemplate.Route, fns []function, log io.Writer) (*gateway.Gateway, error) {
	var out []gateway.Function
	for _, f := range fns {
		gf := gateway.Function{Function: samtemplate.Function{LogicalID: f.Name, Timeout: f.Timeout}, Handler: f.Handler}
		for _, r := range routes {
			if r.Function == f.Name {
				gf.Routes = append(gf.Routes, r)
			}
		}
		out = append(out, gf)
	}
	return gateway.New(out, log)
}

func start(t *testing.T, routes []samtemplate.Route, fns ...function) string {
	t.Helper()
	g, err := newGateway(routes, fns, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv.URL
}

//cyclo:one check per field of the event, each failing with the field's name
func TestRequestBecomesTheV2EventTheGatewaySends(t *testing.T) {
	rec := newRecorder(ok)
	url := start(t, []samtemplate.Route{route("Payments", "GET", "/payments/{id}")},
		function{Name: "Payments", Timeout: time.Second, Handler: rec.handle})

	req, _ := http.NewRequest("GET", url+"/payments/pay%5F42?a=1&b=x%20y&a=2", nil)
	req.Header.Add("X-Custom", "one")
	req.Header.Add("X-Custom", "two")
	req.Header.Set("User-Agent", "test-agent/1.0")
	req.Header.Add("Cookie", "a=1; b=2")
	before := time.Now()
	resp, _ := testsupport.RoundTrip(t, req)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	ev := <-rec.events

	if ev.Version != "2.0" || ev.RouteKey != "GET /payments/{id}" || ev.RequestContext.RouteKey != ev.RouteKey {
		t.Errorf("version %q routeKey %q / %q", ev.Version, ev.RouteKey, ev.RequestContext.RouteKey)
	}
	if ev.RawPath != "/payments/pay%5F42" || ev.RequestContext.HTTP.Path != "/payments/pay_42" {
		t.Errorf("rawPath %q, http.path %q", ev.RawPath, ev.RequestContext.HTTP.Path)
	}
	if ev.PathParameters["id"] != "pay_42" {
		t.Errorf("pathParameters %v, want id pay_42 (decoded)", ev.PathParameters)
	}
	if ev.RawQueryString != "a=1&b=x%20y&a=2" {
		t.Errorf("rawQueryString %q", ev.RawQueryString)
	}
	if ev.Headers["x-custom"] != "one,two" || ev.Headers["user-agent"] != "test-agent/1.0" {
		t.Errorf("headers %v: want lower-case names and repeated values joined with commas", ev.Headers)
	}
	if _, ok := ev.Headers["cookie"]; ok || strings.Join(ev.Cookies, ";") != "a=1;b=2" {
		t.Errorf("cookie header %q, cookies %q: want the Cookie header moved to cookies", ev.Headers["cookie"], ev.Cookies)
	}
	rc := ev.RequestContext
	if rc.HTTP.Method != "GET" || rc.HTTP.Protocol != "HTTP/1.1" || rc.HTTP.SourceIP != "127.0.0.1" || rc.HTTP.UserAgent != "test-agent/1.0" {
		t.Errorf("requestContext.http %+v", rc.HTTP)
	}
	if rc.RequestID == "" || resp.Header.Get("Apigw-Requestid") != rc.RequestID {
		t.Errorf("requestId %q, apigw-requestid %q", rc.RequestID, resp.Header.Get("Apigw-Requestid"))
	}
	if rc.Stage != "$default" || rc.DomainName != "127.0.0.1" {
		t.Errorf("requestContext %+v", rc)
	}
	at := time.UnixMilli(rc.TimeEpoch)
	if at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("timeEpoch %d is not now", rc.TimeEpoch)
	}
	if parsed, err := time.Parse("02/Jan/2006:15:04:05 -0700", rc.Time); err != nil || parsed.Unix() != rc.TimeEpoch/1000 {
		t.Errorf("time %q does not match timeEpoch %d: %v", rc.Time, rc.TimeEpoch, err)
	}
	if ev.Body != "" || ev.IsBase64Encoded {
		t.Errorf("body %q base64 %v for a GET without body", ev.Body, ev.IsBase64Encoded)
	}
}

func TestBinaryBodyTravelsBase64AndRoundTrips(t *testing.T) {
	rec := newRecorder(echo)
	url := start(t, []samtemplate.Route{route("Echo", "POST", "/echo")},
		function{Name: "Echo", Timeout: time.Second, Handler: rec.handle})
	binary := []byte{0x00, 0xff, 0xfe, 'a', 0x80, '\n'}

	for _, tc := range []struct {
		name, contentType string
		body              []byte
		base64            bool
	}{
		{"bytes that are not UTF-8", "application/json", binary, true},
		{"binary content-type", "application/octet-stream", []byte(`{"id":1}`), true},
		{"JSON", "application/json; charset=utf-8", []byte(`{"id":"é"}`), false},
		{"form", "application/x-www-form-urlencoded", []byte("a=1&b=2"), false},
		{"vendor JSON", "application/vnd.api+json", []byte(`{}`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", url+"/echo", bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			resp, got := testsupport.RoundTrip(t, req)
			ev := <-rec.events
			if ev.IsBase64Encoded != tc.base64 {
				t.Errorf("isBase64Encoded %v, want %v", ev.IsBase64Encoded, tc.base64)
			}
			if tc.base64 && ev.Body != base64.StdEncoding.EncodeToString(tc.body) {
				t.Errorf("event body %q is not the base64 of the request body", ev.Body)
			}
			if !tc.base64 && ev.Body != string(tc.body) {
				t.Errorf("event body %q, want %q", ev.Body, tc.body)
			}
			if ev.Headers["content-length"] != itoa(len(tc.body)) {
				t.Errorf("content-length %q", ev.Headers["content-length"])
			}
			if resp.StatusCode != 200 || !bytes.Equal(got, tc.body) {
				t.Errorf("response %d %q, want the request body decoded from base64", resp.StatusCode, got)
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestUnmatchedRequestIsNotFoundLikeTheGateway(t *testing.T) {
	rec := newRecorder(ok)
	url := start(t, []samtemplate.Route{route("Fn", "POST", "/webhooks/stripe")},
		function{Name: "Fn", Timeout: time.Second, Handler: rec.handle})
	for _, tc := range []struct{ method, path string }{
		{"POST", "/webhooks/github"},
		{"GET", "/webhooks/stripe"},
		{"POST", "/webhooks/stripe/extra"},
		{"POST", "/"},
	} {
		req, _ := http.NewRequest(tc.method, url+tc.path, nil)
		resp, body := testsupport.RoundTrip(t, req)
		if resp.StatusCode != 404 || string(body) != `{"message":"Not Found"}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	select {
	case ev := <-rec.events:
		t.Errorf("function invoked for an unmatched request: %s", ev.RawPath)
	default:
	}
}

func TestFailedInvocationIsInternalServerError(t *testing.T) {
	fns := []function{
		{Name: "Err", Timeout: time.Second, Handler: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, errors.New("boom")
		}},
		{Name: "Panic", Timeout: time.Second, Handler: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			panic("boom")
		}},
		{Name: "Slow", Timeout: 200 * time.Millisecond, Handler: func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			time.Sleep(5 * time.Second) // ignores its deadline, as a stuck function would
			return ok(ctx, events.APIGatewayV2HTTPRequest{})
		}},
		{Name: "BadStatus", Timeout: time.Second, Handler: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{Body: "x"}, nil
		}},
		{Name: "BadBase64", Timeout: time.Second, Handler: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "%%%", IsBase64Encoded: true}, nil
		}},
	}
	var routes []samtemplate.Route
	for _, f := range fns {
		routes = append(routes, route(f.Name, "POST", "/"+f.Name))
	}
	url := start(t, routes, fns...)
	for _, f := range fns {
		t0 := time.Now()
		req, _ := http.NewRequest("POST", url+"/"+f.Name, nil)
		resp, body := testsupport.RoundTrip(t, req)
		if resp.StatusCode != 500 || string(body) != `{"message":"Internal Server Error"}` {
			t.Errorf("%s: %d %q", f.Name, resp.StatusCode, body)
		}
		if f.Name == "Slow" && time.Since(t0) > 2*time.Second {
			t.Errorf("a timed-out invocation was answered after %s, not at its timeout", time.Since(t0))
		}
	}
}

func TestInvocationHasTheFunctionTimeout(t *testing.T) {
	got := make(chan time.Duration, 1)
	fn := function{Name: "Fn", Timeout: 7 * time.Second, Handler: func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		deadline, _ := ctx.Deadline()
		got <- time.Until(deadline)
		return ok(ctx, events.APIGatewayV2HTTPRequest{})
	}}
	url := start(t, []samtemplate.Route{route("Fn", "ANY", "/x")}, fn)
	req, _ := http.NewRequest("DELETE", url+"/x", nil)
	testsupport.RoundTrip(t, req)
	if remaining := <-got; remaining > 7*time.Second || remaining < 6*time.Second {
		t.Errorf("remaining time %s, want about the function's 7s timeout", remaining)
	}
}

func TestResponseHeadersCookiesAndStatusAreWritten(t *testing.T) {
	fn := function{Name: "Fn", Timeout: time.Second, Handler: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{
			StatusCode:        409,
			Headers:           map[string]string{"content-type": "application/json", "retry-after": "3"},
			MultiValueHeaders: map[string][]string{"x-multi": {"a", "b"}},
			Cookies:           []string{"s=1; Path=/", "t=2"},
			Body:              `{"error":{}}`,
		}, nil
	}}
	url := start(t, []samtemplate.Route{route("Fn", "POST", "/x")}, fn)
	req, _ := http.NewRequest("POST", url+"/x", nil)
	resp, body := testsupport.RoundTrip(t, req)
	if resp.StatusCode != 409 || resp.Header.Get("Retry-After") != "3" || string(body) != `{"error":{}}` {
		t.Errorf("%d %v %q", resp.StatusCode, resp.Header, body)
	}
	if got := resp.Header.Values("X-Multi"); len(got) != 0 {
		t.Errorf("x-multi %q: multiValueHeaders is no part of payload 2.0, and the gateway ignores it", got)
	}
	if got := resp.Header.Values("Set-Cookie"); strings.Join(got, "|") != "s=1; Path=/|t=2" {
		t.Errorf("set-cookie %q", got)
	}
}

func TestMostSpecificRouteWins(t *testing.T) {
	names := []string{"Literal", "Param", "Any"}
	var fns []function
	for _, n := range names {
		name := n
		fns = append(fns, function{Name: name, Timeout: time.Second, Handler: func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: name}, nil
		}})
	}
	g, err := newGateway([]samtemplate.Route{
		route("Literal", "GET", "/items/special"),
		route("Param", "GET", "/items/{id}"),
		route("Any", "ANY", "/things/{id}"),
	}, fns, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/items/special", "Literal"},
		{"GET", "/items/42", "Param"},
		{"DELETE", "/things/42", "Any"},
		{"GET", "/items/a/b", "Not Found"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if _, body := testsupport.RoundTrip(t, req); !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: served by %q, want %s", tc.method, tc.path, body, tc.want)
		}
	}
	if params, ok := gateway.PathParameters(route("Param", "GET", "/items/{id}"), "/items/a%2Fb"); !ok || params["id"] != "a/b" {
		t.Errorf("parameter %v, %v, want the decoded segment", params, ok)
	}
}

func TestNewRefusesTwoRoutesForTheSameRequests(t *testing.T) {
	fn := function{Name: "Fn", Timeout: time.Second, Handler: ok}
	if _, err := newGateway([]samtemplate.Route{route("Fn", "GET", "/x"), route("Fn", "GET", "/x")}, []function{fn}, io.Discard); err == nil {
		t.Fatal("New accepted two routes for the same requests")
	}
}

func TestAccessLineIsBoundedWhateverTheURL(t *testing.T) {
	var log testsupport.Buffer
	g, err := newGateway([]samtemplate.Route{route("Fn", "POST", "/webhooks/stripe")},
		[]function{{Name: "Fn", Timeout: time.Second, Handler: ok}}, &log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("POST", srv.URL+"/"+strings.Repeat("a", 500_000)+"%0Aforged", nil)
	if resp, _ := testsupport.RoundTrip(t, req); resp.StatusCode != 404 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The line is written once the response is: wait for it, with a bound.
	for deadline := time.Now().Add(5 * time.Second); len(log.Bytes()) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	line := log.String()
	if len(line) == 0 || len(line) > 1024 || strings.Count(line, "\n") != 1 || !strings.Contains(line, "more bytes") {
		t.Fatalf("access line of %d bytes for a 500 KB path: %.200q", len(line), line)
	}
}
