package jsonstr

import (
	"encoding/json"
	"testing"
)

// Append writes what json.Marshal writes, and Plain holds exactly when that is s between quotes.
func TestAppendIsWhatJSONMarshalWrites(t *testing.T) {
	for _, s := range []string{"", "evt_1", "a b~", "\x7f", "quote \"", `back\slash`, "<tag>&", "tab\t", "\x00",
		"é", "ünïcode", "\u2028", "\xff invalid", "sha256:ab12"} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("Append(%q) = %s, want x%s", s, got, want)
		}
		if plain := string(want) == `"`+s+`"`; Plain(s) && !plain {
			t.Errorf("Plain(%q) but json.Marshal writes %s", s, want)
		}
	}
	if !Plain("evt_1NmY2bKx7gT8sQ4r") || Plain("<") || Plain("é") {
		t.Error("Plain misjudges a plain id, an HTML character or non-ASCII")
	}
}

func FuzzAppend(f *testing.F) {
	f.Add("evt_1")
	f.Add("<é\x00>")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Fatalf("Append(%q) = %s, want %s", s, got, want)
		}
		if Plain(s) && string(want) != `"`+s+`"` {
			t.Fatalf("Plain(%q) but json.Marshal writes %s", s, want)
		}
	})
}
