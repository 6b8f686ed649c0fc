package handler_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/pkg/idem"
)

const body1999EUR = `{"amount":1999,"currency":"EUR"}`

func TestFirstRequestCreatesAPaymentThatGetReadsBack(t *testing.T) {
	t.Parallel()
	created := time.Date(2025, 3, 12, 10, 15, 30, 123456789, time.FixedZone("CET", 3600))
	spy := newSpyLedger(ledger.NewMemory())
	h := newHandler(t, sharedEnv(t), handler.WithLedger(spy), handler.WithClock(func() time.Time { return created }))

	resp := do(t, h, post(t, "first-1", `{"amount":1999,"currency":"eur","description":"2 coffees"}`))
	p := wantCreated(t, resp, false)
	if !strings.HasPrefix(p.ID, "pay_") || len(p.ID) != len("pay_")+26 {
		t.Errorf("id %q, want pay_ and 26 characters", p.ID)
	}
	want := payment{ID: p.ID, Amount: 1999, Currency: "EUR", Status: "succeeded", CreatedAt: "2025-03-12T09:15:30.123456789Z"}
	if p != want {
		t.Errorf("payment %+v, want %+v", p, want)
	}
	if n := spy.created.Load(); n != 1 {
		t.Errorf("%d payments written, want 1", n)
	}

	got := do(t, h, get(t, p.ID))
	if got.StatusCode != 200 || got.Body != resp.Body {
		t.Fatalf("GET: %d %s, want 200 %s", got.StatusCode, got.Body, resp.Body)
	}
}

func TestRetryWithTheSameBodyReplaysTheFirstResponse(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	e := sharedEnv(t)
	h := newHandler(t, e, handler.WithLedger(spy))
	first := do(t, h, post(t, "replay-1", `{"amount":1999,"currency":"EUR","metadata":{"order":"42","channel":"web"}}`))
	wantCreated(t, first, false)

	// Another execution environment, and the same request written otherwise: a replay, not a
	// mismatch.
	other := newHandler(t, e, handler.WithLedger(spy))
	for _, body := range []string{
		`{"amount":1999,"currency":"EUR","metadata":{"order":"42","channel":"web"}}`,
		"{\n  \"metadata\": {\"channel\": \"web\", \"order\": \"42\"},\n  \"currency\": \"eur\",\n  \"amount\": 1999\n}\n",
	} {
		for _, hh := range []*handler.Handler{h, other} {
			again := do(t, hh, post(t, "replay-1", body))
			wantCreated(t, again, true)
			if again.Body != first.Body {
				t.Fatalf("replay body %s, want the first body %s", again.Body, first.Body)
			}
		}
	}
	if n := spy.calls.Load(); n != 1 {
		t.Fatalf("the ledger was called %d times, want once", n)
	}
}

func TestSameKeyWithADifferentBodyIsRejectedWith422(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	h := newHandler(t, sharedEnv(t), handler.WithLedger(spy))
	first := do(t, h, post(t, "reuse-1", body1999EUR))
	wantCreated(t, first, false)
	for _, body := range []string{
		`{"amount":2000,"currency":"EUR"}`,
		`{"amount":1999,"currency":"USD"}`,
		`{"amount":1999,"currency":"EUR","description":"changed"}`,
	} {
		wantError(t, do(t, h, post(t, "reuse-1", body)), 422, "idempotency_key_reused")
	}
	// The first request still replays.
	if again := do(t, h, post(t, "reuse-1", body1999EUR)); again.Body != first.Body {
		t.Fatalf("replay after mismatches: %s", again.Body)
	}
	spy.wantWritten(t, 1)
}

func TestRetryWhileTheFirstIsInProgressGets409WithRetryAfter(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	spy.entered, spy.release = make(chan struct{}, 1), make(chan struct{})
	h := newHandler(t, sharedEnv(t), handler.WithLedger(spy))

	firstReq := post(t, "busy-1", body1999EUR)
	var first events.APIGatewayV2HTTPResponse
	done := make(chan struct{})
	go func() {
		defer close(done)
		first, _ = h.Handle(context.Background(), firstReq) // Handle never returns an error
	}()
	<-spy.entered // the first request holds the claim and is writing to the ledger

	busy := do(t, h, post(t, "busy-1", body1999EUR))
	wantError(t, busy, 409, "idempotency_key_in_use")
	if ra := busy.Headers["retry-after"]; ra != "1" {
		t.Errorf("retry-after %q, want 1", ra)
	}
	// A different body under the same key is a mismatch even while the first runs.
	wantError(t, do(t, h, post(t, "busy-1", `{"amount":1,"currency":"EUR"}`)), 422, "idempotency_key_reused")

	close(spy.release)
	<-done
	wantCreated(t, first, false)
	again := do(t, h, post(t, "busy-1", body1999EUR))
	wantCreated(t, again, true)
	if again.Body != first.Body {
		t.Fatalf("replay %s, want %s", again.Body, first.Body)
	}
}

func TestBareAndQuotedKeysAreTheSameKey(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t))
	for _, forms := range [][]string{
		{"order-42", `"order-42"`, "  order-42\t"},
		{`say "hi" \o/`, `"say \"hi\" \\o/"`},
	} {
		first := do(t, h, post(t, forms[0], body1999EUR))
		wantCreated(t, first, false)
		for _, key := range forms[1:] {
			resp := do(t, h, post(t, key, body1999EUR))
			wantCreated(t, resp, true)
			if resp.Body != first.Body {
				t.Fatalf("%q and %q are different keys", forms[0], key)
			}
		}
	}
	// Only the quoted form keeps edge spaces: a bare " padded " is the key "padded".
	quoted := wantCreated(t, do(t, h, post(t, `" padded "`, body1999EUR)), false)
	bare := wantCreated(t, do(t, h, post(t, " padded ", body1999EUR)), false)
	if again := wantCreated(t, do(t, h, post(t, "padded", body1999EUR)), true); again.ID != bare.ID || bare.ID == quoted.ID {
		t.Fatalf("ids: quoted %s, bare %s, trimmed %s", quoted.ID, bare.ID, again.ID)
	}
}

func TestIdempotencyKeyHeaderIsRequiredAndChecked(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	h := newHandler(t, sharedEnv(t), handler.WithLedger(spy))
	wantError(t, do(t, h, post(t, "", body1999EUR)), 400, "missing_idempotency_key")
	blank := post(t, "", body1999EUR)
	blank.Headers[handler.HeaderIdempotencyKey] = "   "
	wantError(t, do(t, h, blank), 400, "missing_idempotency_key")
	for _, key := range []string{
		strings.Repeat("k", 256),
		`"` + strings.Repeat("k", 256) + `"`,
		`""`,
		"clé",
		"a\x00b",
		`"unterminated`,
		`"a";param=1`,
		`"a", "b"`,
		`"bad \escape"`,
	} {
		wantError(t, do(t, h, post(t, key, body1999EUR)), 400, "invalid_idempotency_key")
	}
	if n := spy.calls.Load(); n != 0 {
		t.Fatalf("rejected requests reached the ledger %d times", n)
	}
	wantCreated(t, do(t, h, post(t, strings.Repeat("k", 255), body1999EUR)), false)
	wantCreated(t, do(t, h, post(t, "!~ {}[]", body1999EUR)), false)

	// API Gateway lower-cases header names; other callers of Handle may not.
	mixed := post(t, "", body1999EUR)
	mixed.Headers["Idempotency-Key"] = "mixed-case"
	wantCreated(t, do(t, h, mixed), false)
}

// Every fixture in testdata/invalid is named <field>--<case>.json; the 400 must name the field.
func TestInvalidBodiesGet400NamingTheField(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	h := newHandler(t, sharedEnv(t), handler.WithLedger(spy))
	files, _ := filepath.Glob("testdata/invalid/*.json")
	if len(files) < 40 {
		t.Fatalf("only %d fixtures in testdata/invalid", len(files))
	}
	for _, path := range files {
		field, _, _ := strings.Cut(filepath.Base(path), "--")
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		msg := wantError(t, do(t, h, post(t, "invalid-"+filepath.Base(path), string(body))), 400, "invalid_request")
		if !strings.Contains(msg, field) {
			t.Errorf("%s: message %q does not name %q", filepath.Base(path), msg, field)
		}
	}
	if n := spy.calls.Load(); n != 0 {
		t.Fatalf("invalid requests reached the ledger %d times", n)
	}
}

func TestMaxAmountComesFromTheEnvironment(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t).with("PAYMENTS_MAX_AMOUNT", "1000"))
	wantCreated(t, do(t, h, post(t, "max-1", `{"amount":1000,"currency":"EUR"}`)), false)
	msg := wantError(t, do(t, h, post(t, "max-2", `{"amount":1001,"currency":"EUR"}`)), 400, "invalid_request")
	if msg != "amount: must be at most 1000" {
		t.Fatalf("message %q", msg)
	}
}

func TestBodyOverTheLimitGets413(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t))
	big := `{"amount":1,"currency":"EUR","description":"` + strings.Repeat("x", handler.MaxBodyBytes) + `"}`
	wantError(t, do(t, h, post(t, "big-1", big)), 413, "body_too_large")
	enc := post(t, "big-2", base64.StdEncoding.EncodeToString([]byte(big)))
	enc.IsBase64Encoded = true
	wantError(t, do(t, h, enc), 413, "body_too_large")
}

func TestBase64EncodedBodyIsDecodedFirst(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t))
	p := wantCreated(t, do(t, h, loadEvent(t, "create_payment_base64.json")), false)
	if p.Amount != 1999 || p.Currency != "EUR" {
		t.Fatalf("payment %+v", p)
	}
	bad := post(t, "b64-bad", "not base64!")
	bad.IsBase64Encoded = true
	wantError(t, do(t, h, bad), 400, "invalid_request")
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t))
	route := func(method, path string) events.APIGatewayV2HTTPRequest {
		req := loadEvent(t, "create_payment.json")
		req.RouteKey, req.RequestContext.RouteKey = "$default", "$default"
		req.RequestContext.HTTP.Method, req.RawPath = method, path
		return req
	}
	for _, tt := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/payments", 405, "method_not_allowed", "POST"},
		{"DELETE", "/payments/pay_1", 405, "method_not_allowed", "GET"},
		{"PUT", "/payments/pay_1", 405, "method_not_allowed", "GET"},
		{"GET", "/refunds", 404, "not_found", ""},
		{"POST", "/payments/pay_1/capture", 404, "not_found", ""},
	} {
		resp := do(t, h, route(tt.method, tt.path))
		wantError(t, resp, tt.status, tt.code)
		if resp.Headers["allow"] != tt.allow {
			t.Errorf("%s %s: allow %q, want %q", tt.method, tt.path, resp.Headers["allow"], tt.allow)
		}
	}
	// A $default route still serves the two routes by path, under a named stage too.
	wantCreated(t, do(t, h, loadEvent(t, "default_route_named_stage.json")), false)
}

func TestGetOfAnUnknownPaymentIs404(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t))
	for _, id := range []string{"pay_doesnotexist", "", "../etc/passwd", "pay_" + strings.Repeat("x", 300)} {
		wantError(t, do(t, h, get(t, id)), 404, "not_found")
	}
}

func TestPrincipalsNeverShareKeysOrPayments(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	h := newHandler(t, sharedEnv(t).with(handler.EnvAuth, handler.AuthJWT), handler.WithLedger(spy))
	alice := wantCreated(t, do(t, h, as("alice", post(t, "shared-key", body1999EUR))), false)
	// Bob's first request with the same key and body is his own first request, not a replay.
	bobResp := do(t, h, as("bob", post(t, "shared-key", body1999EUR)))
	bob := wantCreated(t, bobResp, false)
	// A caller whose JWT subject is "anonymous" is not the shared principal of PAYMENTS_AUTH=none.
	anon := wantCreated(t, do(t, h, as("anonymous", post(t, "shared-key", body1999EUR))), false)
	if alice.ID == bob.ID || alice.ID == anon.ID || bob.ID == anon.ID {
		t.Fatalf("payments %s, %s, %s are not distinct", alice.ID, bob.ID, anon.ID)
	}

	if again := wantCreated(t, do(t, h, as("bob", post(t, "shared-key", body1999EUR))), true); again.ID != bob.ID {
		t.Fatalf("bob's replay carries %s, want his %s", again.ID, bob.ID)
	}
	// Each principal's fingerprint is its own: bob reusing the key differently is bob's mismatch.
	wantError(t, do(t, h, as("bob", post(t, "shared-key", `{"amount":5,"currency":"EUR"}`))), 422, "idempotency_key_reused")
	if again := wantCreated(t, do(t, h, as("alice", post(t, "shared-key", body1999EUR))), true); again.ID != alice.ID {
		t.Fatalf("alice's replay carries %s, want her %s", again.ID, alice.ID)
	}

	if resp := do(t, h, as("alice", get(t, alice.ID))); resp.StatusCode != 200 {
		t.Fatalf("alice cannot read her payment: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := do(t, h, as("bob", get(t, bob.ID))); resp.Body != bobResp.Body {
		t.Fatalf("bob reads %s, want %s", resp.Body, bobResp.Body)
	}
	wantError(t, do(t, h, as("alice", get(t, bob.ID))), 404, "not_found")
	wantError(t, do(t, h, as("bob", get(t, alice.ID))), 404, "not_found")
	wantError(t, do(t, h, as("alice", get(t, anon.ID))), 404, "not_found")
	// Without an identity nobody reads anything, not even as a shared principal.
	wantError(t, do(t, h, get(t, alice.ID)), 401, "unauthenticated")
	spy.wantWritten(t, 3)
}

func TestLedgerFailureGets500AndTheRetryRunsAgain(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	logs := &logBuffer{}
	h := newHandler(t, sharedEnv(t), handler.WithLedger(spy), handler.WithLogOutput(logs))
	spy.failNext.Store(true)
	wantError(t, do(t, h, post(t, "fail-1", body1999EUR)), 500, "internal_error")
	if line := logs.lines(t)[0]; line["outcome"] != "error" || !strings.Contains(line["error"].(string), "ledger down") {
		t.Fatalf("log line %v", line)
	}
	// The claim was released and nothing cached: the retry creates the payment.
	wantCreated(t, do(t, h, post(t, "fail-1", body1999EUR)), false)
	spy.wantWritten(t, 1)
}

func TestPaymentIDCollisionDrawsANewID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ids := []string{"pay_a", "pay_a", "pay_b"}
	next := func() string {
		mu.Lock()
		defer mu.Unlock()
		id := ids[0]
		ids = ids[1:]
		return id
	}
	h := newHandler(t, sharedEnv(t), handler.WithIDGenerator(next))
	if p := wantCreated(t, do(t, h, post(t, "id-1", body1999EUR)), false); p.ID != "pay_a" {
		t.Fatalf("first id %s", p.ID)
	}
	if p := wantCreated(t, do(t, h, post(t, "id-2", body1999EUR)), false); p.ID != "pay_b" {
		t.Fatalf("second id %s, want pay_b after the collision", p.ID)
	}
}

func TestEveryRequestWritesOneLogLine(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	h := newHandler(t, sharedEnv(t), handler.WithLogOutput(logs))
	const key = "log-key-secret-7f3a"
	const description = "private note 8c1e"
	body := `{"amount":1999,"currency":"EUR","description":"` + description + `"}`
	p := wantCreated(t, do(t, h, post(t, key, body)), false)
	do(t, h, post(t, key, body))
	do(t, h, post(t, key, body1999EUR))
	do(t, h, post(t, "", body))
	do(t, h, post(t, "log-key-2", `{"amount":"1"}`))
	do(t, h, get(t, p.ID))
	do(t, h, get(t, "pay_unknown"))

	id := obs.KeyID(idem.JoinID(handler.Anonymous, key))
	want := []struct {
		outcome, id, route string
		status, roundTrips float64
	}{
		{"executed", id, handler.RouteCreate, 201, 2},
		{"replayed", id, handler.RouteCreate, 201, 1},
		{"mismatch", id, handler.RouteCreate, 422, 1},
		{"rejected", "", handler.RouteCreate, 400, 0},
		{"rejected", obs.KeyID(idem.JoinID(handler.Anonymous, "log-key-2")), handler.RouteCreate, 400, 0},
		{"executed", p.ID, handler.RouteGet, 200, 0},
		{"rejected", "pay_unknown", handler.RouteGet, 404, 0},
	}
	lines := logs.lines(t)
	if len(lines) != len(want) {
		t.Fatalf("%d log lines for %d requests:\n%s", len(lines), len(want), logs)
	}
	for i, w := range want {
		l := lines[i]
		gotID, _ := l["id"].(string)
		if l["outcome"] != w.outcome || gotID != w.id || l["route"] != w.route || l["status"] != w.status ||
			l["redis_round_trips"] != w.roundTrips || l["function"] != handler.FunctionName {
			t.Errorf("line %d: %v, want %+v", i, l, w)
		}
		if _, ok := l["duration_ms"].(float64); !ok {
			t.Errorf("line %d has no duration_ms", i)
		}
		if _, ok := l["_aws"]; !ok {
			t.Errorf("line %d is not an EMF document", i)
		}
	}
	if s := logs.String(); strings.Contains(s, key) || strings.Contains(s, description) {
		t.Fatalf("the logs hold the raw key or the body:\n%s", s)
	}
}

// Deployed, the function dimension is the function's own name, which holds its stack's name, so
// that two stacks in one account emit metrics (and trip alarms) of their own.
func TestTheFunctionDimensionIsTheDeployedFunctionsName(t *testing.T) {
	t.Parallel()
	const deployed = "idem-dev-PaymentsFunction-A1b2C3d4E5f6"
	logs := &logBuffer{}
	h := newHandler(t, sharedEnv(t).with(handler.EnvFunctionName, deployed), handler.WithLogOutput(logs))
	wantCreated(t, do(t, h, post(t, "dimension-key", body1999EUR)), false)
	lines := logs.lines(t)
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", len(lines), logs)
	}
	if got := lines[0]["function"]; got != deployed {
		t.Errorf("function %v, want %s", got, deployed)
	}
	dims, _ := json.Marshal(lines[0]["_aws"])
	if !strings.Contains(string(dims), `"Dimensions":[["function","outcome"]]`) {
		t.Errorf("EMF declaration %s does not use the function dimension", dims)
	}
	if handler.Function(env{}.get) != handler.FunctionName {
		t.Errorf("outside Lambda the function is %q, want %q", handler.Function(env{}.get), handler.FunctionName)
	}
}

// A body that is not declared JSON is refused before any Redis command or ledger write; a
// request without a content-type is read as JSON.
func TestNonJSONContentTypeGets415(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	h := newHandler(t, sharedEnv(t), handler.WithLedger(spy))
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=iso-8859-1"} {
		req := post(t, "ct-"+ct, body1999EUR)
		req.Headers["content-type"] = ct
		wantError(t, do(t, h, req), 415, "unsupported_media_type")
	}
	spy.wantWritten(t, 0)
	req := post(t, "ct-none", body1999EUR)
	delete(req.Headers, "content-type")
	wantCreated(t, do(t, h, req), false)
	req = post(t, "ct-params", body1999EUR)
	req.Headers["content-type"] = "application/json; charset=UTF-8"
	wantCreated(t, do(t, h, req), false)
}

func TestLeadingZeroAmountIsASyntaxError(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t))
	msg := wantError(t, do(t, h, post(t, "zero-1", `{"amount":012,"currency":"EUR"}`)), 400, "invalid_request")
	if !strings.Contains(msg, "not valid JSON") || strings.Contains(msg, "greater than 0") {
		t.Fatalf("message %q; want the syntax error", msg)
	}
}

// paddedLedger hands back every payment it writes with a 300 KiB status: a response too large
// for Redis to keep, as a payment with a large field would be.
type paddedLedger struct{ ledger.Ledger }

func (l paddedLedger) Create(ctx context.Context, key string, p ledger.Payment) (ledger.Payment, error) {
	stored, err := l.Ledger.Create(ctx, key, p)
	stored.Status = strings.Repeat("x", 300<<10)
	return stored, err
}

// A payment whose response cannot be stored in Redis: the first request gets its 201, the
// guard keeps a marker in place of the response, and each of the 4 retries with the key gets 409
// idempotency_result_unavailable, without retry-after, and writes nothing to the ledger.
func TestPaymentWhoseResponseCannotBeStoredIsMadeOnceOverFiveRequests(t *testing.T) {
	t.Parallel()
	spy := newSpyLedger(ledger.NewMemory())
	logs := &logBuffer{}
	h := newHandler(t, sharedEnv(t), handler.WithLedger(paddedLedger{spy}), handler.WithLogOutput(logs))
	if resp := do(t, h, post(t, "padded-1", body1999EUR)); resp.StatusCode != 201 || len(resp.Body) < 300<<10 {
		t.Fatalf("first request: %d with %d bytes; want 201 with the payment", resp.StatusCode, len(resp.Body))
	}
	for retry := 1; retry <= 4; retry++ {
		resp := do(t, h, post(t, "padded-1", body1999EUR))
		wantError(t, resp, 409, "idempotency_result_unavailable")
		if ra, ok := resp.Headers["retry-after"]; ok {
			t.Fatalf("retry %d: retry-after %q; want none, retrying changes nothing", retry, ra)
		}
	}
	if n := spy.calls.Load(); n != 1 {
		t.Fatalf("the ledger was called %d times over 5 requests; want once", n)
	}
	spy.wantWritten(t, 1)

	var requests []map[string]any
	warned := 0
	for _, l := range logs.lines(t) {
		switch l["msg"] {
		case "request":
			requests = append(requests, l)
		case "idempotency: result not stored or not replayable":
			warned++
		}
	}
	if len(requests) != 5 || warned != 5 {
		t.Fatalf("%d request lines and %d warnings for 5 requests; want 5 of each:\n%s", len(requests), warned, logs)
	}
	for i, l := range requests {
		want := map[bool]string{true: "executed", false: "replayed"}[i == 0]
		if l["outcome"] != want || l["reason"] != "result_not_replayable" || l["level"] != "INFO" {
			t.Errorf("request %d: %v; want outcome %s, reason result_not_replayable, level INFO", i+1, l, want)
		}
	}
}
