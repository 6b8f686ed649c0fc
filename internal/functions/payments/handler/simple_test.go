package handler

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// simpleBodies are bodies of the common shape, each with what parseSimple must make of it:
// accepted (true) or left to parseStrict (false).
var simpleBodies = map[string]bool{
	`{"amount":1999,"currency":"EUR"}`:                                            true,
	` {"currency" : "eur",` + "\n\t\r" + `"amount": 1 } ` + "\n":                  true,
	`{"amount":99999999,"currency":"USD","description":"<b>&x</b>"}`:              true,
	`{"amount":5,"currency":"GBP","metadata":{"b":"2","a":"1"},"description":""}`: true,
	`{"amount":5,"currency":"GBP","metadata":{}}`:                                 true,
	`{"amount":5,"currency":"GBP","metadata":{ "k" : "" , "l":"v" }}`:             true,
	`{"amount":100000000,"currency":"USD"}`:                                       false, // over the maximum
	`{"amount":123456789012345678901,"currency":"USD"}`:                           false, // overflows
	`{"amount":0,"currency":"EUR"}`:                                               false,
	`{"amount":012,"currency":"EUR"}`:                                             false,
	`{"amount":-1,"currency":"EUR"}`:                                              false,
	`{"amount":1.0,"currency":"EUR"}`:                                             false,
	`{"amount":1e2,"currency":"EUR"}`:                                             false,
	`{"amount":"1","currency":"EUR"}`:                                             false,
	`{"amount":1,"currency":"EUR",}`:                                              false,
	`{"amount":1,"currency":"EUR"}x`:                                              false,
	`{"amount":1,"currency":"EUR"}{}`:                                             false,
	`{"amount":1,"currency":"EUR"`:                                                false,
	`{"amount":1,"amount":2,"currency":"EUR"}`:                                    false,
	`{"amount":1}`:                                                                    false,
	`{"currency":"EUR"}`:                                                              false,
	`{}`:                                                                              false,
	`{"amount":1,"currency":"XYZ"}`:                                                   false,
	`{"amount":1,"currency":"EU\u0052"}`:                                              false, // an escape
	`{"\u0061mount":1,"currency":"EUR"}`:                                              false,
	`{"Amount":1,"currency":"EUR"}`:                                                   false,
	`{"amount":1,"currency":"EUR","other":1}`:                                         false,
	`{"amount":1,"currency":"EUR","description":"café"}`:                              false, // not ASCII
	`{"amount":1,"currency":"EUR","description":null}`:                                false,
	`{"amount":1,"currency":"EUR","metadata":{"":"v"}}`:                               false,
	`{"amount":1,"currency":"EUR","metadata":{"a":"1","a":"2"}}`:                      false,
	`{"amount":1,"currency":"EUR","metadata":{"a":"1",}}`:                             false,
	`{"amount":1,"currency":"EUR","metadata":{"a":1}}`:                                false,
	`{"amount":1,"currency":"EUR","metadata":[]}`:                                     false,
	"{\"amount\":1,\"currency\":\"EUR\",\"description\":\"a\tb\"}":                    false, // a control character
	"\ufeff" + `{"amount":1,"currency":"EUR"}`:                                        false,
	`{"amount":1,"currency":"EUR","description":"` + strings.Repeat("x", 1001) + `"}`: false,
	`{"amount":1,"currency":"EUR","description":"` + strings.Repeat("x", 1000) + `"}`: true,
}

func TestParseSimpleAcceptsTheCommonShapeOnly(t *testing.T) {
	for body, want := range simpleBodies {
		if _, ok := parseSimple([]byte(body), DefaultMaxAmount); ok != want {
			t.Errorf("parseSimple(%.80s) ok = %v, want %v", body, ok, want)
		}
		checkSimpleAgreesWithStrict(t, []byte(body))
	}
	for _, name := range []string{"minimal.json", "lower-case-currency.json", "maximum-amount.json", "whitespace.json", "empty-optionals.json"} {
		if _, ok := parseSimple(readFixture(t, filepath.Join("testdata/valid", name)), DefaultMaxAmount); !ok {
			t.Errorf("parseSimple leaves %s to parseStrict", name)
		}
	}
}

func TestParseSimpleKeepsTheMetadataLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"amount":1,"currency":"EUR","metadata":{`)
	for i := range MaxMetadataKeys + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":"v"`)
	}
	b.WriteString(`}}`)
	tooMany := b.String()
	for body, want := range map[string]bool{
		tooMany: false,
		`{"amount":1,"currency":"EUR","metadata":{"` + strings.Repeat("k", MaxMetadataKeyLength) + `":"` + strings.Repeat("v", MaxMetadataValueLength) + `"}}`: true,
		`{"amount":1,"currency":"EUR","metadata":{"` + strings.Repeat("k", MaxMetadataKeyLength+1) + `":"v"}}`:                                                 false,
		`{"amount":1,"currency":"EUR","metadata":{"k":"` + strings.Repeat("v", MaxMetadataValueLength+1) + `"}}`:                                               false,
	} {
		if _, ok := parseSimple([]byte(body), DefaultMaxAmount); ok != want {
			t.Errorf("parseSimple(%.80s...) ok = %v, want %v", body, ok, want)
		}
		checkSimpleAgreesWithStrict(t, []byte(body))
	}
}

func TestParseSimpleKeepsTheConfiguredMaximum(t *testing.T) {
	if r, ok := parseSimple([]byte(`{"amount":500,"currency":"EUR"}`), 500); !ok || r.Amount != 500 {
		t.Fatalf("amount at the limit: %+v %v", r, ok)
	}
	if _, ok := parseSimple([]byte(`{"amount":501,"currency":"EUR"}`), 500); ok {
		t.Fatal("amount over the limit accepted")
	}
}

// checkSimpleAgreesWithStrict fails t when parseSimple accepts body as a request parseStrict
// refuses or reads otherwise.
func checkSimpleAgreesWithStrict(t *testing.T, body []byte) {
	t.Helper()
	simple, ok := parseSimple(body, DefaultMaxAmount)
	if !ok {
		return
	}
	strict, err := parseStrict(body, DefaultMaxAmount)
	if err != nil {
		t.Fatalf("parseSimple accepts %q, parseStrict refuses it: %v", body, err)
	}
	if !reflect.DeepEqual(simple, strict) {
		t.Fatalf("%q: parseSimple reads %+v, parseStrict %+v", body, simple, strict)
	}
}

// The fingerprint written by hand for a request without description and metadata is the one
// its definition gives.
func TestFingerprintIsFingerprintJSONOfTheEncoding(t *testing.T) {
	for _, r := range []createRequest{
		{Amount: 1, Currency: "EUR"},
		{Amount: DefaultMaxAmount, Currency: "USD"},
		{Amount: 1<<63 - 1, Currency: "JPY"},
		{Amount: 7, Currency: "GBP", Metadata: map[string]string{}},
		{Amount: 7, Currency: "GBP", Description: "x"},
		{Amount: 7, Currency: "GBP", Metadata: map[string]string{"b": "<2>", "a": "1"}},
		{Amount: 7, Currency: `E"R`},
	} {
		checkFingerprintByDefinition(t, r)
	}
}

// checkFingerprintByDefinition fails t unless r's fingerprint is FingerprintJSON of its JSON
// encoding.
func checkFingerprintByDefinition(t *testing.T, r createRequest) {
	t.Helper()
	got, err := r.fingerprint()
	want, werr := r.fingerprintOfEncoding()
	if err != nil || werr != nil || got != want {
		t.Fatalf("%+v: fingerprint %x, %v; by its definition %x, %v", r, got, err, want, werr)
	}
}
