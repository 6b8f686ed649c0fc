package handler

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/ledger"
)

// The middleware is given the request with the route's method and only the idempotency key's
// header, under its canonical name whatever the case it came in (the lower-case name first).
func TestGuardedKeepsOnlyTheKeyHeader(t *testing.T) {
	req := loadEvent(t, "create_payment.json")
	req.RequestContext.HTTP.Method = ""
	req.Cookies = []string{"a=1"}
	g := guarded(req)
	want := map[string]string{"Idempotency-Key": req.Headers["idempotency-key"]}
	if !reflect.DeepEqual(g.Headers, want) || g.Cookies != nil || g.RequestContext.HTTP.Method != http.MethodPost {
		t.Fatalf("guarded: headers %v, cookies %v, method %q", g.Headers, g.Cookies, g.RequestContext.HTTP.Method)
	}
	if g.Body != req.Body || g.IsBase64Encoded != req.IsBase64Encoded || g.RawPath != req.RawPath {
		t.Fatal("guarded changed the body or the path")
	}
	if len(req.Headers) != 10 || req.RequestContext.HTTP.Method != "" {
		t.Fatal("guarded changed the request it was given")
	}
	req.Headers["IDEMPOTENCY-KEY"] = req.Headers["idempotency-key"]
	delete(req.Headers, "idempotency-key")
	if g := guarded(req); !reflect.DeepEqual(g.Headers, want) {
		t.Fatalf("upper-case name: %v", g.Headers)
	}
	req.Headers["idempotency-key"] = "lower"
	if g := guarded(req); g.Headers["Idempotency-Key"] != "lower" || len(g.Headers) != 1 {
		t.Fatalf("both names: %v, want the lower-case one's", g.Headers)
	}
	delete(req.Headers, "idempotency-key")
	delete(req.Headers, "IDEMPOTENCY-KEY")
	if g := guarded(req); len(g.Headers) != 0 {
		t.Fatalf("no key header: %v", g.Headers)
	}
}

func TestPaymentIDsAreLowerCaseBase32(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := newPaymentID()
		rest, ok := strings.CutPrefix(id, "pay_")
		if !ok || len(rest) != 26 || strings.Trim(rest, paymentIDAlphabet) != "" || seen[id] {
			t.Fatalf("id %q", id)
		}
		seen[id] = true
	}
}

// A payment is answered in the bytes json.Marshal writes for it, or with its error.
func TestPaymentJSONIsWhatMarshalWrites(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 7, 8, 123456789, time.UTC)
	base := ledger.Payment{ID: "pay_abc", Principal: "jwt:x", Amount: 1999, Currency: "EUR", Status: StatusSucceeded,
		CreatedAt: at, Fingerprint: "ff", Fence: 7}
	vary := []func(*ledger.Payment){
		func(*ledger.Payment) {},
		func(p *ledger.Payment) { p.CreatedAt = at.Truncate(time.Second) },
		func(p *ledger.Payment) { p.CreatedAt = at.In(time.FixedZone("", -3*3600-30*60)) },
		func(p *ledger.Payment) { p.CreatedAt = time.Time{} },
		func(p *ledger.Payment) { p.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(p *ledger.Payment) { p.Amount = -1 << 63 },
		func(p *ledger.Payment) { p.ID = `pay_<"\\&>` },
		func(p *ledger.Payment) { p.ID = "pay_é\u2028\x7f\x01" },
		func(p *ledger.Payment) { p.Status, p.Currency = "", "" },
	}
	for i, f := range vary {
		p := base
		f(&p)
		want, wantErr := json.Marshal(p)
		got, err := paymentJSON(p)
		if (err != nil) != (wantErr != nil) || err == nil && got != string(want) {
			t.Errorf("%d: paymentJSON = %s, %v; json.Marshal = %s, %v", i, got, err, want, wantErr)
		}
	}
	if _, ok := appendPaymentJSON(nil, base); !ok {
		t.Error("a payment of plain strings is not written by hand")
	}
}
