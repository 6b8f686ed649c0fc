package idemhttp_test

import (
	"bytes"
	"encoding/json"
	"github.com/idemlambda/idem/internal/refusal"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// A response too large to store (300 KiB): the handler runs once over 5 requests with the same
// key; the first gets its response, the others 409 idempotency_result_unavailable, and the
// guard's observer hears of each. With fencing on, the handler reads its claim's token.
func TestResponseTooLargeToStoreRunsOnce(t *testing.T) {
	var observed []idem.Kind
	g, err := idem.New(testsupport.SharedRedis(t), idem.WithPrefix(testsupport.UniquePrefix(t)+"idemhttp"),
		idem.WithFencing(), idem.WithObserver(func(o idem.Observation) { observed = append(observed, o.Outcome.Kind) }))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idemhttp.New(g, "api")
	if err != nil {
		t.Fatal(err)
	}
	var runs int
	var fences []uint64
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		f, _ := idem.FenceFrom(r.Context())
		fences = append(fences, f)
		w.WriteHeader(201)
		w.Write(bytes.Repeat([]byte("x"), 300<<10))
	}))
	for call := 1; call <= 5; call++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Idempotency-Key", "order-300kib")
		h.ServeHTTP(rec, req)
		if call == 1 {
			if rec.Code != 201 || rec.Body.Len() != 300<<10 {
				t.Fatalf("first request: %d with %d bytes; want the handler's 201", rec.Code, rec.Body.Len())
			}
			continue
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != 409 || body.Error.Code != refusal.CodeResultUnavailable || rec.Header().Get("retry-after") != "" {
			t.Fatalf("request %d: %d %q retry-after %q; want 409 %s without retry-after", call, rec.Code, body.Error.Code, rec.Header().Get("retry-after"), refusal.CodeResultUnavailable)
		}
	}
	if runs != 1 || fences[0] == 0 {
		t.Fatalf("handler ran %d times (tokens %v); want once, with a token", runs, fences)
	}
	if len(observed) != 5 || observed[0] != idem.NotReplayable {
		t.Fatalf("observer heard %v; want 5 NotReplayable", observed)
	}
}
