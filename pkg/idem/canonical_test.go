package idem

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// canonicalCases are payloads of every shape the canonical form has an answer for: key order,
// repeated keys, escapes, HTML characters, non-ASCII and invalid UTF-8, U+2028, numbers as
// written, nesting, white space, and payloads that are not one JSON value.
var canonicalCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1e2`, `1.50`, `-12.5E-3`, `""`, ` "x" `,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":{"z":1,"y":[3,2,{"q":null,"p":true}]},"a":0}`,
	"{\n\t\"amount\" : 100 ,\r\n \"currency\":\"EUR\" }",
	`{"k":"plain text, with: punctuation! ~"}`, `{"k":"a\"b\\c\/d"}`, `{"k":"\n\t\r\b\f\u0001"}`,
	`{"k":"<script>&amp;</script>"}`, `{"k":"\u003c\u003e\u0026"}`, `{"k":"café ☕ 日本"}`,
	`{"k":"\u00e9\ud83d\ude00"}`, `{"k":"\ud800"}`, `{"k":"\udc00\ud800x"}`, "{\"k\":\"\u2028\u2029\"}",
	`{"k":"\u2028"}`, "{\"k\":\"\xff\xfe\"}", "{\"\xc3\":1}", `{"é":1,"e":2,"z":3,"É":4}`,
	`{"a\u0000b":1,"a":2}`, `{"<k>":1}`, `{"\"":1,"\\":2,"/":3,"\/":4}`,
	`[1,"two",{"three":3},[4,[5,[]]],{}]`, `[ 1 , 2 ]`, `{"n":12345678901234567890123,"f":1.0000000000000000001}`,
	`{"provider":"stripe","id":"evt_1","payload":{"b":[1,2],"a":"x"},"received_at":"2026"}`,
	`{"id":"e","id":"f","payload":null}`, `{"payload":{"id":1}}`,
	// Not one JSON value: FingerprintJSON answers these by decoding (an error, or the first value).
	``, ` `, `{`, `{"a":}`, `[1,]`, `{} {}`, `{}}`, `1 2`, `nul`, `"\x"`, "\"\x01\"", `01`, `{"a":1,}`,
}

// canonicalFields are the field selections the cases are fingerprinted with.
var canonicalFields = [][]string{nil, {"id"}, {"provider", "id", "payload"}, {"a", "k", "é", "missing"}}

// The canonical form written without decoding is byte for byte the decoded value's: every
// fingerprint stored by an earlier release (from the decoded value) matches the one taken now,
// and every payload refused is refused the same way.
func TestFingerprintJSONIsTheDecodedValuesFingerprint(t *testing.T) {
	var cases []string
	cases = append(cases, canonicalCases...)
	cases = append(cases, `{"deep":`+strings.Repeat(`[`, 500)+strings.Repeat(`]`, 500)+`}`)
	var wide strings.Builder
	wide.WriteString("{")
	for i := 99; i >= 0; i-- {
		wide.WriteString(`"k` + strconv.Itoa(i*7%100) + `":"v` + strconv.Itoa(i) + `",`)
	}
	wide.WriteString(`"end":1}`)
	cases = append(cases, wide.String())
	for _, payload := range cases {
		for _, fields := range canonicalFields {
			assertCanonicalMatchesDecoded(t, []byte(payload), fields)
		}
	}
}

func FuzzFingerprintJSONIsTheDecodedValuesFingerprint(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c), false)
		f.Add([]byte(c), true)
	}
	f.Fuzz(func(t *testing.T, payload []byte, selectFields bool) {
		var fields []string
		if selectFields {
			fields = []string{"provider", "id", "payload", "a"}
		}
		assertCanonicalMatchesDecoded(t, payload, fields)
	})
}

func assertCanonicalMatchesDecoded(t *testing.T, payload []byte, fields []string) {
	t.Helper()
	want, wantErr := fingerprintDecoded(payload, fields)
	got, gotErr := FingerprintJSON(payload, fields...)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%q %q: error %v, decoding gives %v", payload, fields, gotErr, wantErr)
	}
	if got != want {
		t.Fatalf("%q %q: fingerprint %x, decoding gives %x", payload, fields, got, want)
	}
}

// Every valid payload is written without decoding (the decoding path is left to payloads that
// are not one JSON value, or not an object when fields are selected).
func TestFingerprintJSONOfAValidPayloadDoesNotDecode(t *testing.T) {
	for _, payload := range canonicalCases {
		if !json.Valid([]byte(payload)) {
			continue
		}
		if _, ok := fingerprintCanonical([]byte(payload), nil); !ok {
			t.Errorf("%q took the decoding path", payload)
		}
	}
}
