// Package httpguide holds the code of docs/library.md's idemhttp section as the guide shows it,
// and runs it (internal/guide checks that the guide's blocks are here).
package httpguide

import (
	"context"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// newGuard builds the client and the guard. Call it once per execution environment, from main
// (or init), and build what uses the guard after it, not in a package-level variable: those are
// initialised before init runs, and would be given a nil guard (which the constructors refuse).
func newGuard() (*idem.Guard, error) {
	// ContextTimeoutEnabled: the client honours the deadlines the guard gives each command. The
	// final store call's is the claim's expiry, so a store that stops answering is reported
	// (NotStored) as another delivery can take the key, not after the client's timeouts.
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	// Result TTL: longer than the source's retry window (SQS: the queue's retention period).
	return idem.New(rdb, idem.WithPrefix("orders"), idem.WithResultTTL(5*24*time.Hour))
}

// subjectKey is where your authentication middleware puts the caller, for net/http.
type subjectKey struct{}

// caller names who sent a request, so that each caller has keys of its own. Behind API Gateway
// the identity is in the event's request context, where the authorizer put it: r.Event is the
// event (here an HTTP API with a JWT authorizer; Authorizer.IAM.UserARN for IAM authorization,
// Authorizer.Lambda for a Lambda authorizer). Under net/http it is what your authentication
// middleware put in the request's context.
func caller(ctx context.Context, r *idemhttp.Request) (string, bool) {
	if ev, ok := r.Event.(events.APIGatewayV2HTTPRequest); ok {
		if a := ev.RequestContext.Authorizer; a != nil && a.JWT != nil {
			sub := a.JWT.Claims["sub"]
			return sub, sub != ""
		}
		return "", false
	}
	sub, _ := ctx.Value(subjectKey{}).(string)
	return sub, sub != ""
}

func newMiddleware() (*idemhttp.Middleware, error) {
	guard, err := newGuard()
	if err != nil {
		return nil, err
	}
	return idemhttp.New(guard, "orders-api", idemhttp.WithCaller(caller))
}

// net/http: a container, or a Lambda function behind the Lambda Web Adapter.
func createOrder(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"order":"ord_1"}`)) // your work
}

func serve() error {
	mw, err := newMiddleware()
	if err != nil {
		return err
	}
	http.Handle("/orders", mw.Handler(http.HandlerFunc(createOrder)))
	return http.ListenAndServe(":8080", nil)
}

var _ = serve // compiled here; the test serves through httptest

// API Gateway HTTP API (payload v2.0); idemhttp.APIGatewayProxy (REST API, v1.0),
// idemhttp.FunctionURL and idemhttp.ALB likewise.
func handleOrder(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"order":"ord_1"}`}, nil // your work
}

func main() {
	mw, err := newMiddleware()
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(idemhttp.HTTPAPI(mw, handleOrder))
}

var _ = main // compiled here, run by Lambda

func TestTheGuidesNetHTTPHandlerAnswersARetryWithTheFirstResponse(t *testing.T) {
	t.Setenv("REDIS_ADDR", testsupport.StartMiniredis(t).Addr())
	mw, err := newMiddleware()
	if err != nil {
		t.Fatal(err)
	}
	// Your authentication, in front of the middleware.
	authn := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if sub := r.Header.Get("x-test-subject"); sub != "" {
				r = r.WithContext(context.WithValue(r.Context(), subjectKey{}, sub))
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(authn(mw.Handler(http.HandlerFunc(createOrder))))
	defer srv.Close()
	post := func(sub, key string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{"item":"book"}`))
		req.Header.Set("Idempotency-Key", key)
		if sub != "" {
			req.Header.Set("x-test-subject", sub)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := post("alice", "k1"); r.StatusCode != 201 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v", r.StatusCode, r.Header)
	}
	if r := post("alice", "k1"); r.StatusCode != 201 || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v; want the first response, replayed", r.StatusCode, r.Header)
	}
	if r := post("bob", "k1"); r.StatusCode != 201 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another caller, same key: %d %v; want a response of its own", r.StatusCode, r.Header)
	}
	if r := post("", "k1"); r.StatusCode != 401 {
		t.Fatalf("no caller: %d, want 401", r.StatusCode)
	}
}

func TestTheGuidesLambdaHandlerReadsTheCallerFromTheAuthorizer(t *testing.T) {
	t.Setenv("REDIS_ADDR", testsupport.StartMiniredis(t).Addr())
	mw, err := newMiddleware()
	if err != nil {
		t.Fatal(err)
	}
	h := idemhttp.HTTPAPI(mw, handleOrder)
	event := func(sub string) events.APIGatewayV2HTTPRequest {
		ev := events.APIGatewayV2HTTPRequest{RawPath: "/orders", Body: `{"item":"book"}`,
			Headers: map[string]string{"idempotency-key": "k1"}}
		ev.RequestContext.HTTP.Method = "POST"
		if sub != "" {
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}}}
		}
		return ev
	}
	ctx := context.Background()
	for i, want := range []struct {
		sub      string
		status   int
		replayed string
	}{{"alice", 201, ""}, {"alice", 201, "true"}, {"bob", 201, ""}, {"", 401, ""}} {
		resp, err := h(ctx, event(want.sub))
		if err != nil || resp.StatusCode != want.status || resp.Headers[idemhttp.HeaderReplayed] != want.replayed {
			t.Fatalf("request %d (%q): %d %v %v; want %d, replayed %q", i, want.sub, resp.StatusCode, resp.Headers, err, want.status, want.replayed)
		}
	}
}
