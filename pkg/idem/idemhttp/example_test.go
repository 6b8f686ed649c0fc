package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// exampleMiddleware builds, as a function's init would, a Middleware on the Redis at
// 127.0.0.1:6379, with keys under a prefix of their own so runs never meet.
func exampleMiddleware(opts ...idemhttp.Option) (*idemhttp.Middleware, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	prefix := "example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	guard, err := idem.New(rdb, idem.WithPrefix(prefix), idem.WithResultTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	m, err := idemhttp.New(guard, "orders-api", opts...)
	if err != nil {
		panic(err)
	}
	return m, func() { rdb.Close() }
}

// As net/http middleware (a container, or a Lambda function behind the Lambda Web Adapter): a
// retry with the same Idempotency-Key gets the first response back, marked as a replay; the
// same key with another body is refused.
func ExampleMiddleware_Handler() {
	m, closeRedis := exampleMiddleware()
	defer closeRedis()
	orders := 0
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d}`, orders)
	})
	srv := httptest.NewServer(m.Handler(create))
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(b))
	}
	post("8e03978e-40d5-43e8-bc93-6894a57f9324", `{"sku":"tea"}`)
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"sku":"tea"}`) // the quoted form: same key
	post("8e03978e-40d5-43e8-bc93-6894a57f9324", `{"sku":"coffee"}`)
	// Output:
	// 201  {"order":1}
	// 201 true {"order":1}
	// 422  {"error":{"code":"idempotency_key_reused","message":"this idempotency key was already used with a different request"}}
}

// For an API Gateway REST API (payload v1.0): wrap the handler you pass to lambda.Start.
func ExampleAPIGatewayProxy() {
	m, closeRedis := exampleMiddleware()
	defer closeRedis()
	handler := idemhttp.APIGatewayProxy(m, func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: `{"order":"ord_1"}`}, nil
	})
	req := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/orders",
		Headers: map[string]string{"Idempotency-Key": "k-1"}, Body: `{"sku":"tea"}`}
	for range 2 {
		resp, err := handler(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Headers[idemhttp.HeaderReplayed], resp.Body, err)
	}
	// Output:
	// 201  {"order":"ord_1"} <nil>
	// 201 true {"order":"ord_1"} <nil>
}

// For an API Gateway HTTP API (payload v2.0), with keys scoped to the caller's JWT subject: an
// anonymous request is 401 before any Redis command, and two callers' equal keys never meet.
func ExampleHTTPAPI() {
	m, closeRedis := exampleMiddleware(idemhttp.WithCaller(func(_ context.Context, r *idemhttp.Request) (string, bool) {
		ev := r.Event.(events.APIGatewayV2HTTPRequest)
		if ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.JWT == nil {
			return "", false
		}
		sub := ev.RequestContext.Authorizer.JWT.Claims["sub"]
		return sub, sub != ""
	}))
	defer closeRedis()
	handler := idemhttp.HTTPAPI(m, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"order":"ord_1"}`}, nil
	})
	req := func(sub string) events.APIGatewayV2HTTPRequest {
		r := events.APIGatewayV2HTTPRequest{RawPath: "/orders", Headers: map[string]string{"idempotency-key": "k-1"}}
		r.RequestContext.HTTP.Method = "POST"
		if sub != "" {
			r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}}}
		}
		return r
	}
	for _, sub := range []string{"", "alice", "bob", "alice"} {
		resp, _ := handler(context.Background(), req(sub))
		fmt.Printf("%q %d %q\n", sub, resp.StatusCode, resp.Headers[idemhttp.HeaderReplayed])
	}
	// Output:
	// "" 401 ""
	// "alice" 201 ""
	// "bob" 201 ""
	// "alice" 201 "true"
}

// For a Lambda function URL: while the first request runs, a retry is told to come back later.
func ExampleFunctionURL() {
	m, closeRedis := exampleMiddleware()
	defer closeRedis()
	var handler func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)
	handler = idemhttp.FunctionURL(m, func(ctx context.Context, req events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		// A retry arrives while this request still runs.
		retry, _ := handler(ctx, req)
		fmt.Println("retry:", retry.StatusCode, retry.Headers["retry-after"], retry.Body)
		return events.LambdaFunctionURLResponse{StatusCode: 200, Body: `{"done":true}`}, nil
	})
	req := events.LambdaFunctionURLRequest{RawPath: "/jobs", Headers: map[string]string{"idempotency-key": "job-7"}}
	req.RequestContext.HTTP.Method = "POST"
	resp, _ := handler(context.Background(), req)
	fmt.Println("first:", resp.StatusCode, resp.Body)
	// Output:
	// retry: 409 1 {"error":{"code":"idempotency_key_in_use","message":"a request with this idempotency key is still being processed; retry it later"}}
	// first: 200 {"done":true}
}

// For an Application Load Balancer target: a failed response is not stored, so the retry runs
// the handler again.
func ExampleALB() {
	m, closeRedis := exampleMiddleware()
	defer closeRedis()
	attempts := 0
	handler := idemhttp.ALB(m, func(ctx context.Context, req events.ALBTargetGroupRequest) (events.ALBTargetGroupResponse, error) {
		attempts++
		if attempts == 1 {
			return events.ALBTargetGroupResponse{StatusCode: 502, Body: `{"error":"upstream"}`}, nil
		}
		return events.ALBTargetGroupResponse{StatusCode: 200, Body: `{"sent":true}`}, nil
	})
	req := events.ALBTargetGroupRequest{HTTPMethod: "POST", Path: "/send", Headers: map[string]string{"idempotency-key": "msg-1"}}
	for range 3 {
		resp, _ := handler(context.Background(), req)
		fmt.Println(resp.StatusDescription, resp.Headers[idemhttp.HeaderReplayed], resp.Body)
	}
	// Output:
	// 502 Bad Gateway  {"error":"upstream"}
	// 200 OK  {"sent":true}
	// 200 OK true {"sent":true}
}

// ParseKey reads both forms of the header the same way.
func ExampleParseKey() {
	for _, v := range []string{`abc-123`, `"abc-123"`, `"a\"b"`, ``, `"abc`} {
		key, err := idemhttp.ParseKey(v)
		fmt.Printf("%q %q %v\n", v, key, err)
	}
	// Output:
	// "abc-123" "abc-123" <nil>
	// "\"abc-123\"" "abc-123" <nil>
	// "\"a\\\"b\"" "a\"b" <nil>
	// "" "" the idempotency-key header is required
	// "\"abc" "" idempotency-key: a quoted key lacks its closing quote
}
