package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/refusal"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// sharedGuard is a guard on the shared Redis, under a prefix of the test's own.
func sharedGuard(t *testing.T) *idem.Guard {
	t.Helper()
	return guardOn(t, testsupport.SharedRedis(t))
}

// guardOn is a guard on client, under a prefix of the test's own.
func guardOn(tb testing.TB, client *redis.Client) *idem.Guard {
	tb.Helper()
	g, err := idem.New(client, idem.WithPrefix(testsupport.UniquePrefix(tb)+"idemhttp"))
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// countedMiddleware is a middleware for scope "api" on a guard like sharedGuard's, and the
// counter of the commands its client sends once it has connected.
func countedMiddleware(tb testing.TB) (*idemhttp.Middleware, *idem.Guard, *testsupport.CommandCounter) {
	tb.Helper()
	client := testsupport.SharedRedis(tb)
	client.Ping(context.Background()) // dial outside the counted calls
	counter := &testsupport.CommandCounter{}
	client.AddHook(counter)
	g := guardOn(tb, client)
	m, err := idemhttp.New(g, "api")
	if err != nil {
		tb.Fatal(err)
	}
	return m, g, counter
}

// serveHTTP sends one POST with key and body through h and returns the recorded answer.
func serveHTTP(h http.Handler, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestPanickingHandlerIsA500AndReleasesTheClaim(t *testing.T) {
	m, err := idemhttp.New(sharedGuard(t), "api")
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			panic("boom")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	first := serveHTTP(h, "k", "{}")
	var body struct{ Error struct{ Code string } }
	if err := json.Unmarshal(first.Body.Bytes(), &body); err != nil || first.Code != 500 || body.Error.Code != refusal.CodeInternal {
		t.Fatalf("panic answered %d %s", first.Code, first.Body)
	}
	if again := serveHTTP(h, "k", "{}"); again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "" || runs.Load() != 2 {
		t.Fatalf("retry after a panic answered %d (runs %d); want a new 201", again.Code, runs.Load())
	}
}

func TestCustomFingerprintDecidesWhatIsTheSamePayload(t *testing.T) {
	m, err := idemhttp.New(sharedGuard(t), "api", idemhttp.WithFingerprint(func(_ context.Context, r *idemhttp.Request) (idem.Fingerprint, error) {
		return idem.FingerprintJSON(r.Body, "amount")
	}))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) }))
	serveHTTP(h, "k", `{"amount":1,"note":"a"}`)
	if a := serveHTTP(h, "k", `{"note":"b","amount":1}`); a.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a change outside the fingerprint answered %d, want a replay", a.Code)
	}
	if a := serveHTTP(h, "k", `{"amount":2}`); a.Code != 422 {
		t.Fatalf("another amount answered %d, want 422", a.Code)
	}
	if a := serveHTTP(h, "k2", `not json`); a.Code != 400 || !strings.Contains(a.Body.String(), refusal.CodeInvalidRequest) {
		t.Fatalf("a body the fingerprint refuses answered %d %s, want 400 invalid_request", a.Code, a.Body)
	}
}

func TestWithStoredChoosesWhichResponsesAreReplayed(t *testing.T) {
	m, err := idemhttp.New(sharedGuard(t), "api", idemhttp.WithStored(func(status int) bool { return status < 500 }))
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusPaymentRequired) // a definitive business answer: keep it
	}))
	serveHTTP(h, "k", "{}")
	if a := serveHTTP(h, "k", "{}"); a.Code != 402 || a.Header().Get("Idempotent-Replayed") != "true" || runs.Load() != 1 {
		t.Fatalf("retry answered %d replayed=%q runs=%d; want the stored 402", a.Code, a.Header().Get("Idempotent-Replayed"), runs.Load())
	}
}

func TestNewRefusesAnUnusableConfiguration(t *testing.T) {
	g := sharedGuard(t)
	for name, build := range map[string]func() (*idemhttp.Middleware, error){
		"nil guard":     func() (*idemhttp.Middleware, error) { return idemhttp.New(nil, "api") },
		"empty scope":   func() (*idemhttp.Middleware, error) { return idemhttp.New(g, "") },
		"scope braces":  func() (*idemhttp.Middleware, error) { return idemhttp.New(g, "a{b}") },
		"empty header":  func() (*idemhttp.Middleware, error) { return idemhttp.New(g, "api", idemhttp.WithHeader("")) },
		"zero body":     func() (*idemhttp.Middleware, error) { return idemhttp.New(g, "api", idemhttp.WithMaxBody(0)) },
		"nil predicate": func() (*idemhttp.Middleware, error) { return idemhttp.New(g, "api", idemhttp.WithStored(nil)) },
	} {
		if m, err := build(); err == nil || m != nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// What the observer is told matches the core's sentinels, as Do's own errors do.
func TestObservedErrorsMatchTheCoreSentinels(t *testing.T) {
	m0 := testsupport.StartMiniredis(t)
	g := guardOn(t, m0.NewClient())
	var mu sync.Mutex
	var got []error
	m, err := idemhttp.New(g, "api", idemhttp.WithObserver(func(_ context.Context, _ idem.Outcome, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	hold, started := make(chan struct{}), make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hold") != "" {
			close(started)
			<-hold
		}
		w.WriteHeader(201)
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := httptest.NewRequest("POST", "/orders?hold=1", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "held")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}()
	<-started
	held := httptest.NewRequest("POST", "/orders?hold=1", strings.NewReader("{}"))
	held.Header.Set("Idempotency-Key", "held")
	inProgress := httptest.NewRecorder()
	h.ServeHTTP(inProgress, held)
	if inProgress.Code != 409 {
		t.Fatalf("in progress answered %d", inProgress.Code)
	}
	close(hold)
	<-done
	serveHTTP(h, "k", `{"a":1}`)
	if a := serveHTTP(h, "k", `{"a":2}`); a.Code != 422 {
		t.Fatalf("other payload answered %d", a.Code)
	}
	m0.Close()
	if a := serveHTTP(h, "k2", `{}`); a.Code != 503 {
		t.Fatalf("Redis down answered %d", a.Code)
	}
	mu.Lock()
	defer mu.Unlock()
	// got: in progress, the held first (nil), k (nil), the mismatch, unavailable.
	for i, want := range map[int]error{0: idem.ErrInProgress, 3: idem.ErrMismatch, 4: idem.ErrUnavailable} {
		if len(got) != 5 || !errors.Is(got[i], want) {
			t.Fatalf("observed %v; want %v at %d", got, want, i)
		}
	}
	if _, err := idemhttp.ParseKey(""); !errors.Is(err, idem.ErrInvalidKey) || !errors.Is(err, idemhttp.ErrMissingKey) {
		t.Fatalf("ParseKey of a blank key: %v", err)
	}
}
