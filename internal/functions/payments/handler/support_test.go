package handler_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/testsupport"
)

// env is a fake environment for New.
type env map[string]string

func (e env) get(name string) string { return e[name] }

// with returns a copy of e with more variables set.
func (e env) with(kv ...string) env {
	c := make(env, len(e)+len(kv)/2)
	for k, v := range e {
		c[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i]] = kv[i+1]
	}
	return c
}

// sharedEnv points the handler at the shared test Redis, under a prefix of this test's own.
func sharedEnv(t *testing.T) env {
	t.Helper()
	testsupport.SharedRedis(t) // skips (or fails under CI) when it does not answer
	return env{"REDIS_URL": "redis://" + testsupport.SharedRedisAddr(), "IDEM_KEY_PREFIX": testsupport.UniquePrefix(t)}
}

// newHandler builds a handler as an execution environment's init would, closed at cleanup.
// Its log lines go to a buffer unless opts say otherwise.
func newHandler(t *testing.T, e env, opts ...handler.Option) *handler.Handler {
	t.Helper()
	h, err := handler.New(context.Background(), e.get, append([]handler.Option{handler.WithLogOutput(&logBuffer{})}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

// do invokes h as Lambda would, with a 10 second invocation deadline.
func do(t *testing.T, h *handler.Handler, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.Handle(ctx, req)
	if err != nil {
		t.Fatalf("Handle returned an error: %v", err)
	}
	if ct := resp.Headers["content-type"]; ct != "application/json" {
		t.Fatalf("content-type %q, want application/json (status %d, body %s)", ct, resp.StatusCode, resp.Body)
	}
	return resp
}

func loadEvent(t testing.TB, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile("testdata/events/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return req
}

// post returns a POST /payments event from an anonymous caller; an empty key sends no header.
func post(t testing.TB, key, body string) events.APIGatewayV2HTTPRequest {
	req := loadEvent(t, "create_payment.json")
	delete(req.Headers, handler.HeaderIdempotencyKey)
	if key != "" {
		req.Headers[handler.HeaderIdempotencyKey] = key
	}
	req.Body = body
	return req
}

// get returns a GET /payments/{id} event from an anonymous caller.
func get(t testing.TB, id string) events.APIGatewayV2HTTPRequest {
	req := loadEvent(t, "get_payment.json")
	req.PathParameters["id"] = id
	req.RawPath = "/payments/" + id
	req.RequestContext.HTTP.Path = req.RawPath
	return req
}

// as makes req come from the JWT subject sub.
func as(sub string, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}},
	}
	return req
}

// payment is the JSON of a payment as the API returns it.
type payment struct {
	ID        string `json:"id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
}

func decodePayment(t testing.TB, resp events.APIGatewayV2HTTPResponse) payment {
	t.Helper()
	var p payment
	dec := json.NewDecoder(bytes.NewReader([]byte(resp.Body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("payment body %s: %v", resp.Body, err)
	}
	return p
}

// wantCreated checks a 201 with a payment and whether it is marked as a replay.
func wantCreated(t testing.TB, resp events.APIGatewayV2HTTPResponse, replayed bool) payment {
	t.Helper()
	if resp.StatusCode != 201 {
		t.Fatalf("status %d, want 201; body %s", resp.StatusCode, resp.Body)
	}
	if got := resp.Headers[handler.HeaderReplayed] == "true"; got != replayed {
		t.Fatalf("%s header is %q, want replayed=%v", handler.HeaderReplayed, resp.Headers[handler.HeaderReplayed], replayed)
	}
	return decodePayment(t, resp)
}

// wantError checks an error response's status and code and returns its message.
func wantError(t testing.TB, resp events.APIGatewayV2HTTPResponse, status int, code string) string {
	t.Helper()
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatalf("error body %s: %v", resp.Body, err)
	}
	if resp.StatusCode != status || body.Error.Code != code {
		t.Fatalf("got %d %q (%s), want %d %q", resp.StatusCode, body.Error.Code, body.Error.Message, status, code)
	}
	if body.Error.Message == "" {
		t.Fatalf("error %q has no message", code)
	}
	return body.Error.Message
}

// spyLedger counts what reaches the ledger and can hold, delay or fail Create.
type spyLedger struct {
	ledger.Ledger
	calls   atomic.Int64 // Create calls
	created atomic.Int64 // payments actually written
	delay   time.Duration
	// entered, when set, receives once per Create call; release, when set, is waited for.
	entered  chan struct{}
	release  chan struct{}
	failNext atomic.Bool
}

var errLedgerDown = errors.New("ledger down")

func newSpyLedger(l ledger.Ledger) *spyLedger { return &spyLedger{Ledger: l} }

// wantWritten stops the test unless exactly want payments were written.
func (s *spyLedger) wantWritten(t *testing.T, want int64) {
	t.Helper()
	if n := s.created.Load(); n != want {
		t.Fatalf("%d payments written, want %d", n, want)
	}
}

func (s *spyLedger) Create(ctx context.Context, key string, p ledger.Payment) (ledger.Payment, error) {
	s.calls.Add(1)
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.release != nil {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ledger.Payment{}, ctx.Err()
		}
	}
	time.Sleep(s.delay)
	if s.failNext.Swap(false) {
		return ledger.Payment{}, errLedgerDown
	}
	stored, err := s.Ledger.Create(ctx, key, p)
	if err == nil {
		s.created.Add(1)
	}
	return stored, err
}

// logBuffer collects log lines from concurrent requests.
type logBuffer struct{ testsupport.Buffer }

// lines returns every line written so far, each decoded as a JSON object.
func (b *logBuffer) lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}
