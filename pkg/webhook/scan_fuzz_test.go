package webhook_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/idemlambda/idem/pkg/webhook"
)

// FuzzScanJSONAgreesWithEncodingJSON checks the one-pass body reader against
// encoding/json on any input: the same documents are valid, its compact copy
// is json.Compact's, its top-level members' spans make up the object, and a member it reads is the one encoding/json decodes
// (when the object names it once).
func FuzzScanJSONAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"id":"evt_1","data":{"object":{"id":"pi_1"}}}`, `{"id":7}`, `{"id":"a","id":"b"}`, `{"\u0069d":"x"}`,
		`[1,2,{"a":null}]`, ` {"a" : [ true , false ] } `, `{"a":"\ud800"}`, `{"a":1e5,"b":-0.5E-3}`, `{"a":01}`,
		`{"a":"x"} {}`, `"str"`, `{`, `{"a":"\u00e9\n"}`, "{\"a\":\"\xff\"}", `{"a":[[[[]]]]}`,
	} {
		f.Add([]byte(seed), "id")
	}
	f.Add([]byte(`{"data":{"object":{"id":"pi_1"}}}`), "data.object.id")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		valid, compact, member, top := webhook.ScanJSON(body, path)
		if valid != json.Valid(body) {
			t.Fatalf("valid = %v, json.Valid = %v for %q", valid, !valid, body)
		}
		if !valid {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, body); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(compact, want.Bytes()) {
			t.Fatalf("compact %q, json.Compact %q", compact, want.Bytes())
		}
		checkMemberSpans(t, compact, top)
		if member == "" || path == "" {
			return
		}
		// encoding/json keeps the last of a name given twice; the scanner
		// refuses it, so a member read is one encoding/json agrees on.
		var v any = map[string]any{}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		for _, key := range splitDots(path) {
			obj, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("read %q at %q, which encoding/json does not reach", member, path)
			}
			v = obj[key]
		}
		var got string
		switch x := v.(type) {
		case string:
			got = x
		case json.Number:
			got = x.String()
		}
		if got != member && utf8.ValidString(got) {
			t.Fatalf("member %q at %q, encoding/json reads %q", member, path, got)
		}
	})
}

// checkMemberSpans checks that the top-level members' spans, joined, are the object.
func checkMemberSpans(t *testing.T, compact []byte, top [][]byte) {
	t.Helper()
	if compact[0] == '{' && !bytes.Equal(append(append([]byte{'{'}, bytes.Join(top, []byte{','})...), '}'), compact) {
		t.Fatalf("members %q do not make the object %q", top, compact)
	}
}

func splitDots(path string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(path); i++ {
		if i == len(path) || path[i] == '.' {
			out = append(out, path[start:i])
			start = i + 1
		}
	}
	return out
}
