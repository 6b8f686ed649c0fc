package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/refusal"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

func TestMiddlewareOnRedis(t *testing.T) {
	c := testsupport.SharedRedis(t)
	runSuite(t, c, testsupport.UniquePrefix(t)+"idemhttp")
}

func TestMiddlewareOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis cluster")
	}
	cl := testsupport.StartCluster(t, 3, 0)
	c := cl.NewClient()
	t.Cleanup(func() { c.Close() })
	runSuite(t, c, "idemhttp")
}

// business counts its runs and answers 201 with two cookies, so replays can be compared header
// by header. A request header x-fail makes it fail; x-status makes it answer that status.
type business struct {
	runs  atomic.Int64
	delay time.Duration
}

var errBusiness = errors.New("business failure")

func (b *business) serve(ctx context.Context, c call) (int, map[string][]string, string, error) {
	n := b.runs.Add(1)
	if c.header["x-fail"] != "" {
		return 0, nil, "", errBusiness
	}
	if s := c.header["x-status"]; s != "" {
		status, _ := strconv.Atoi(s)
		return status, map[string][]string{"content-type": {"application/json"}}, `{"refused":true}`, nil
	}
	select {
	case <-time.After(b.delay):
	case <-ctx.Done():
		return 0, nil, "", ctx.Err()
	}
	return 201, map[string][]string{
		"content-type": {"application/json"},
		"x-run":        {strconv.FormatInt(n, 10)},
		"set-cookie":   {"a=1; Path=/", "b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT"},
	}, fmt.Sprintf(`{"run":%d,"body":%q}`, n, c.body), nil
}

// trips records the round trips of each guarded request, in order.
type trips struct {
	mu sync.Mutex
	rt []int
}

func (r *trips) observe(_ context.Context, out idem.Outcome, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rt = append(r.rt, out.RoundTrips)
}

func (r *trips) all() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.rt)
}

func runSuite(t *testing.T, client redis.UniversalClient, prefix string) {
	for _, ad := range adapters {
		t.Run(ad.name, func(t *testing.T) {
			s := suite{client: client, prefix: prefix, ad: ad}
			for _, tc := range suiteCases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, s) })
			}
		})
	}
}

// suite is the middleware behind one adapter over one store; every case of suiteCases runs on it.
type suite struct {
	client redis.UniversalClient
	prefix string
	ad     adapter
}

// suiteCases is what the middleware guarantees through every adapter, on every store.
var suiteCases = []struct {
	name string
	run  func(t *testing.T, s suite)
}{
	{"FiftyConcurrentCallsWithOneKeyExecuteOnce", testFiftyConcurrentCallsWithOneKeyExecuteOnce},
	{"ReplayReturnsTheFirstResponse", testReplayReturnsTheFirstResponse},
	{"FailedCallReleasesTheClaim", testFailedCallReleasesTheClaim},
	{"KeyReusedWithAnotherPayloadIs422", testKeyReusedWithAnotherPayloadIs422},
	{"MissingOrMalformedKeyIs400", testMissingOrMalformedKeyIs400},
	{"KeysAreScopedPerCaller", testKeysAreScopedPerCaller},
	{"BodyOverTheLimitIs413", testBodyOverTheLimitIs413},
	{"UnguardedMethodsPassThrough", testUnguardedMethodsPassThrough},
	{"UnreachableRedisIs503", testUnreachableRedisIs503},
}

// setup builds a middleware on its own guard and an app, and returns the way to call it.
func (s suite) setup(t *testing.T, b *business, opts ...idemhttp.Option) (func(call) answer, *trips) {
	g, err := idem.New(s.client, idem.WithPrefix(s.prefix))
	if err != nil {
		t.Fatal(err)
	}
	rt := &trips{}
	m, err := idemhttp.New(g, "api", append([]idemhttp.Option{idemhttp.WithObserver(rt.observe)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s.ad.build(t, m, b.serve), rt
}

// key is a key of the running test alone.
func key(t *testing.T) string { return t.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) }

// post is a POST of body with key, and the extra headers given as name, value pairs.
func post(key, body string, extra ...string) call {
	h := map[string]string{"Idempotency-Key": key}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return call{method: "POST", path: "/orders", header: h, body: body}
}

func testFiftyConcurrentCallsWithOneKeyExecuteOnce(t *testing.T, s suite) {
	b := &business{delay: 300 * time.Millisecond}
	do, rt := s.setup(t, b)
	k := key(t)
	answers := make([]answer, 50)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = do(post(k, `{"amount":1}`)) })
	}
	wg.Wait()
	var executed, inProgress, replayed int
	for _, a := range answers {
		switch {
		case a.err != nil:
			t.Fatalf("call failed: %v", a.err)
		case a.status == 201 && a.get("idempotent-replayed") == "true":
			replayed++
		case a.status == 201:
			executed++
		case a.status == 409:
			inProgress++
			wantError(t, a, 409, refusal.CodeInProgress)
			if a.get("retry-after") != "1" {
				t.Fatalf("409 retry-after = %q, want 1", a.get("retry-after"))
			}
		default:
			t.Fatalf("unexpected answer %d %s", a.status, a.body)
		}
	}
	if runs := b.runs.Load(); runs != 1 || executed != 1 {
		t.Fatalf("handler ran %d times, %d answers executed (409: %d, replayed: %d); want 1 and 1", runs, executed, inProgress, replayed)
	}
	for _, n := range rt.all() {
		if n != 1 && n != 2 {
			t.Fatalf("a call took %d round trips; want 2 for the first, 1 for the others", n)
		}
	}
}

func testReplayReturnsTheFirstResponse(t *testing.T, s suite) {
	b := &business{}
	do, rt := s.setup(t, b)
	k := key(t)
	first := do(post(k, `{"amount":2}`))
	if first.err != nil || first.status != 201 || first.get("idempotent-replayed") != "" {
		t.Fatalf("first call: %d %v %v", first.status, first.header, first.err)
	}
	again := do(post(`"`+k+`"`, `{"amount":2}`)) // the quoted form is the same key
	if again.err != nil || again.status != 201 || again.get("idempotent-replayed") != "true" {
		t.Fatalf("replay: %d %v %v", again.status, again.header, again.err)
	}
	if again.body != first.body || again.get("x-run") != "1" || again.get("content-type") != "application/json" {
		t.Fatalf("replay body %q x-run %q, want %q and 1", again.body, again.get("x-run"), first.body)
	}
	if got := again.header["set-cookie"]; !slices.Equal(got, first.header["set-cookie"]) || len(got) != 2 {
		t.Fatalf("replayed cookies %q, want %q", got, first.header["set-cookie"])
	}
	if got := rt.all(); !slices.Equal(got, []int{2, 1}) || b.runs.Load() != 1 {
		t.Fatalf("round trips %v, runs %d; want [2 1] and 1", got, b.runs.Load())
	}
}

func testFailedCallReleasesTheClaim(t *testing.T, s suite) {
	b := &business{}
	do, rt := s.setup(t, b)
	k := key(t)
	failed := do(post(k, `{"amount":3}`, "x-fail", "1"))
	if s.ad.name == "net/http" {
		if failed.status != 500 {
			t.Fatalf("failed call answered %d, want the handler's 500", failed.status)
		}
	} else if !errors.Is(failed.err, errBusiness) {
		t.Fatalf("failed call returned %v, want the handler's error", failed.err)
	}
	refused := do(post(k, `{"amount":3}`, "x-status", "400"))
	if refused.status != 400 || refused.body != `{"refused":true}` || refused.get("idempotent-replayed") != "" {
		t.Fatalf("a 400 from the handler answered %d %s", refused.status, refused.body)
	}
	ok := do(post(k, `{"amount":3}`))
	if ok.status != 201 || ok.get("idempotent-replayed") != "" || ok.get("x-run") != "3" {
		t.Fatalf("retry after failures answered %d replayed=%q run=%q; want a new 201, run 3", ok.status, ok.get("idempotent-replayed"), ok.get("x-run"))
	}
	if got := rt.all(); !slices.Equal(got, []int{2, 2, 2}) {
		t.Fatalf("round trips %v, want [2 2 2]", got)
	}
}

func testKeyReusedWithAnotherPayloadIs422(t *testing.T, s suite) {
	b := &business{}
	do, _ := s.setup(t, b)
	k := key(t)
	do(post(k, `{"amount":4}`))
	a := do(post(k, `{"amount":5}`))
	wantError(t, a, 422, refusal.CodeKeyReused)
	other := do(call{method: "POST", path: "/other", header: map[string]string{"Idempotency-Key": k}, body: `{"amount":4}`})
	wantError(t, other, 422, refusal.CodeKeyReused)
	if b.runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", b.runs.Load())
	}
}

func testMissingOrMalformedKeyIs400(t *testing.T, s suite) {
	b := &business{}
	do, rt := s.setup(t, b)
	wantError(t, do(call{method: "POST", path: "/orders", body: "{}"}), 400, refusal.CodeMissingKey)
	for _, bad := range []string{`"abc`, `"a";p=1`, "clé", strings.Repeat("k", idemhttp.MaxKeyLength+1)} {
		wantError(t, do(post(bad, "{}")), 400, refusal.CodeInvalidKey)
	}
	if b.runs.Load() != 0 || len(rt.all()) != 0 {
		t.Fatalf("a refused request reached the handler or Redis")
	}
}

func testKeysAreScopedPerCaller(t *testing.T, s suite) {
	b := &business{}
	do, rt := s.setup(t, b, idemhttp.WithCaller(func(_ context.Context, r *idemhttp.Request) (string, bool) {
		c := r.Header.Get("X-Caller")
		return c, c != ""
	}))
	k := key(t)
	wantError(t, do(post(k, `{"amount":6}`)), 401, refusal.CodeUnauthenticated)
	if len(rt.all()) != 0 {
		t.Fatal("an unauthenticated request reached Redis")
	}
	alice := do(post(k, `{"amount":6}`, "x-caller", "alice"))
	bob := do(post(k, `{"amount":6}`, "x-caller", "bob"))
	if alice.status != 201 || bob.status != 201 || bob.get("idempotent-replayed") != "" || bob.get("x-run") != "2" {
		t.Fatalf("bob's first request answered %d replayed=%q run=%q; want his own 201", bob.status, bob.get("idempotent-replayed"), bob.get("x-run"))
	}
	again := do(post(k, `{"amount":6}`, "x-caller", "alice"))
	if again.get("idempotent-replayed") != "true" || again.body != alice.body {
		t.Fatalf("alice's retry answered %q, want her first response %q", again.body, alice.body)
	}
}

func testBodyOverTheLimitIs413(t *testing.T, s suite) {
	b := &business{}
	do, rt := s.setup(t, b, idemhttp.WithMaxBody(16))
	wantError(t, do(post(key(t), strings.Repeat("x", 17))), 413, refusal.CodeBodyTooLarge)
	if a := do(post(key(t), strings.Repeat("x", 16))); a.status != 201 {
		t.Fatalf("a body at the limit answered %d %s", a.status, a.body)
	}
	if b.runs.Load() != 1 || len(rt.all()) != 1 {
		t.Fatalf("runs %d, guarded %d; want 1 and 1", b.runs.Load(), len(rt.all()))
	}
}

func testUnguardedMethodsPassThrough(t *testing.T, s suite) {
	b := &business{}
	do, rt := s.setup(t, b)
	a := do(call{method: "GET", path: "/orders"})
	if a.err != nil || a.status != 201 || b.runs.Load() != 1 || len(rt.all()) != 0 {
		t.Fatalf("GET answered %d %v; runs %d, guarded %d", a.status, a.err, b.runs.Load(), len(rt.all()))
	}
}

func testUnreachableRedisIs503(t *testing.T, s suite) {
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { down.Close() })
	g, err := idem.New(down)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idemhttp.New(g, "api")
	if err != nil {
		t.Fatal(err)
	}
	b := &business{}
	a := s.ad.build(t, m, b.serve)(post(key(t), "{}"))
	wantError(t, a, 503, refusal.CodeUnavailable)
	if a.get("retry-after") != "1" || b.runs.Load() != 0 {
		t.Fatalf("retry-after %q, runs %d; want 1 and 0 (fail closed)", a.get("retry-after"), b.runs.Load())
	}
}

// wantError checks a JSON error answer: status, content-type and stable code.
func wantError(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("want %d %s, got error %v", status, code, a.err)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(a.body), &body); err != nil || a.status != status || body.Error.Code != code || body.Error.Message == "" {
		t.Fatalf("got %d %s, want %d with code %s", a.status, a.body, status, code)
	}
	if ct := a.get("content-type"); ct != "application/json" {
		t.Fatalf("content-type %q, want application/json", ct)
	}
}
