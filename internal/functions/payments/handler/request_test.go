package handler

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidBodiesAreAccepted(t *testing.T) {
	want := map[string]createRequest{
		"minimal.json":             {Amount: 1, Currency: "EUR"},
		"lower-case-currency.json": {Amount: 2500, Currency: "JPY"},
		"maximum-amount.json":      {Amount: DefaultMaxAmount, Currency: "USD"},
		"whitespace.json":          {Amount: 1999, Currency: "USD"},
		"full.json": {Amount: 1999, Currency: "GBP", Description: "Order #1042 – 2 × coffee",
			Metadata: map[string]string{"order_id": "1042", "channel": "web"}},
		"empty-optionals.json": {Amount: 1999, Currency: "GBP", Metadata: map[string]string{}},
	}
	files, _ := filepath.Glob("testdata/valid/*.json")
	if len(files) != len(want) {
		t.Fatalf("%d fixtures in testdata/valid, %d expectations", len(files), len(want))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			got, err := parseCreateRequest(readFixture(t, path), DefaultMaxAmount)
			if err != nil {
				t.Fatalf("parseCreateRequest: %v", err)
			}
			if w := want[filepath.Base(path)]; !reflect.DeepEqual(got, w) {
				t.Fatalf("got %+v, want %+v", got, w)
			}
		})
	}
}

// Files in testdata/invalid are named <field>--<case>.json; the error must name the field.
func TestInvalidBodiesAreRejectedNamingTheField(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.json")
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/invalid")
	}
	for _, path := range files {
		name := filepath.Base(path)
		field, _, ok := strings.Cut(name, "--")
		if !ok {
			t.Fatalf("fixture %s is not named <field>--<case>.json", name)
		}
		t.Run(name, func(t *testing.T) {
			got, err := parseCreateRequest(readFixture(t, path), DefaultMaxAmount)
			var ie *inputError
			if !errors.As(err, &ie) {
				t.Fatalf("parseCreateRequest = %+v, %v; want an *inputError", got, err)
			}
			if !strings.Contains(ie.field, field) || !strings.HasPrefix(err.Error(), ie.field+": ") {
				t.Fatalf("error %q does not name field %q", err, field)
			}
		})
	}
}

func TestAmountLimitIsConfigurable(t *testing.T) {
	if _, err := parseCreateRequest([]byte(`{"amount":500,"currency":"EUR"}`), 500); err != nil {
		t.Fatalf("amount at the limit: %v", err)
	}
	_, err := parseCreateRequest([]byte(`{"amount":501,"currency":"EUR"}`), 500)
	if err == nil || err.Error() != "amount: must be at most 500" {
		t.Fatalf("amount over the limit: %v", err)
	}
}

func TestFingerprintIgnoresFormattingButNotContent(t *testing.T) {
	fp := func(body string) string {
		t.Helper()
		r, err := parseCreateRequest([]byte(body), DefaultMaxAmount)
		if err != nil {
			t.Fatalf("parseCreateRequest(%s): %v", body, err)
		}
		f, err := r.fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		return string(f[:])
	}
	base := fp(`{"amount":100,"currency":"EUR","metadata":{"a":"1","b":"2"}}`)
	for _, same := range []string{
		`{"currency":"eur","amount":100,"metadata":{"b":"2","a":"1"}}`,
		" {\n \"amount\" : 100 ,\t\"currency\":\"Eur\", \"metadata\":{\"a\":\"1\",\"b\":\"2\"},\"description\":\"\"}\n",
	} {
		if fp(same) != base {
			t.Errorf("%s: fingerprint differs from the same request formatted otherwise", same)
		}
	}
	if fp(`{"amount":100,"currency":"EUR"}`) != fp(`{"amount":100,"currency":"EUR","metadata":{}}`) {
		t.Error("empty metadata fingerprints differently from none")
	}
	for _, other := range []string{
		`{"amount":101,"currency":"EUR","metadata":{"a":"1","b":"2"}}`,
		`{"amount":100,"currency":"USD","metadata":{"a":"1","b":"2"}}`,
		`{"amount":100,"currency":"EUR","metadata":{"a":"1","b":"3"}}`,
		`{"amount":100,"currency":"EUR","metadata":{"a":"1","b":"2"},"description":"x"}`,
	} {
		if fp(other) == base {
			t.Errorf("%s: same fingerprint as a different request", other)
		}
	}
}

func TestCurrencyListHoldsOnlyThreeUpperCaseLetters(t *testing.T) {
	if len(currencies) < 150 {
		t.Fatalf("only %d currencies loaded", len(currencies))
	}
	for code := range currencies {
		if len(code) != 3 || strings.ToUpper(code) != code || strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			t.Errorf("bad entry %q in iso4217.txt", code)
		}
	}
	for _, code := range []string{"EUR", "USD", "JPY", "GBP", "CHF", "BHD", "CLF", "XOF"} {
		if currencies[code] != code {
			t.Errorf("%s missing", code)
		}
	}
}

func FuzzParseCreateRequest(f *testing.F) {
	for _, dir := range []string{"testdata/valid", "testdata/invalid"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, path := range files {
			f.Add(readFixture(f, path))
		}
	}
	for body := range simpleBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSimpleAgreesWithStrict(t, body)
		r, err := parseCreateRequest(body, DefaultMaxAmount)
		if err != nil {
			var ie *inputError
			if !errors.As(err, &ie) || ie.field == "" {
				t.Fatalf("error %v (%T) names no field", err, err)
			}
			return
		}
		checkWithinLimits(t, r)
		checkCanonicalFormParsesAlike(t, r)
		checkFingerprintByDefinition(t, r)
	})
}

// checkWithinLimits fails t unless the accepted request r keeps every documented limit.
func checkWithinLimits(t *testing.T, r createRequest) {
	t.Helper()
	if r.Amount < 1 || r.Amount > DefaultMaxAmount {
		t.Fatalf("accepted amount %d", r.Amount)
	}
	if code, ok := currencyCode(r.Currency); !ok || code != r.Currency {
		t.Fatalf("accepted currency %q", r.Currency)
	}
	if len(r.Metadata) > MaxMetadataKeys {
		t.Fatalf("accepted %d metadata entries", len(r.Metadata))
	}
}

// checkCanonicalFormParsesAlike fails t unless the canonical form of the accepted request r is
// itself accepted, as the same request with the same fingerprint.
func checkCanonicalFormParsesAlike(t *testing.T, r createRequest) {
	t.Helper()
	canonical, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	again, err := parseCreateRequest(canonical, DefaultMaxAmount)
	if err != nil {
		t.Fatalf("canonical form %s rejected: %v", canonical, err)
	}
	if len(again.Metadata) == 0 && len(r.Metadata) == 0 {
		again.Metadata, r.Metadata = nil, nil
	}
	if !reflect.DeepEqual(again, r) {
		t.Fatalf("canonical form %s parsed as %+v, want %+v", canonical, again, r)
	}
	fp1, err1 := r.fingerprint()
	fp2, err2 := again.fingerprint()
	if err1 != nil || err2 != nil || fp1 != fp2 {
		t.Fatalf("fingerprints differ: %v %v", err1, err2)
	}
}

// A number with a leading zero is a JSON syntax error, and the answer says so: the token
// stream alone would read it as the amount 0 and answer "must be greater than 0".
func TestLeadingZeroIsASyntaxErrorNamedAsSuch(t *testing.T) {
	_, err := parseCreateRequest([]byte(`{"amount":012,"currency":"EUR"}`), DefaultMaxAmount)
	if err == nil || !strings.HasPrefix(err.Error(), "body: not valid JSON at byte 12: invalid character '1'") {
		t.Fatalf("error %v; want a syntax error at byte 12 naming the character", err)
	}
}

func TestJSONContentTypes(t *testing.T) {
	for v, want := range map[string]bool{
		"":                                  true,
		"application/json":                  true,
		"Application/JSON":                  true,
		"application/json; charset=utf-8":   true,
		"application/json;charset=UTF-8":    true,
		"application/json; v=1":             true,
		"application/json; charset=latin1":  false,
		"text/plain":                        false,
		"application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x":   false,
		"application/jsonx":                 false,
		"application/json;;":                false,
	} {
		if got := jsonContentType(v); got != want {
			t.Errorf("jsonContentType(%q) = %v, want %v", v, got, want)
		}
	}
}
