package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostileTexts are request texts built to grow when written as JSON.
var hostileTexts = map[string]string{
	"plain":         strings.Repeat("a", 500_000),
	"controls":      strings.Repeat("\x01", 500_000),
	"quotes":        strings.Repeat(`"\`, 250_000),
	"invalid utf-8": strings.Repeat("\xff", 500_000),
	"separators":    strings.Repeat("\u2028", 170_000),
	"multibyte":     strings.Repeat("é€😀", 60_000),
}

// jsonString is s as log/slog writes it, without the quotes.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key != "v" {
				return slog.Attr{}
			}
			return a
		},
	})).Info("", "v", s)
	line := strings.TrimSpace(buf.String())
	return strings.TrimSuffix(strings.TrimPrefix(line, `{"v":"`), `"}`)
}

func TestBoundCutsAtTheWrittenWidthBetweenCharacters(t *testing.T) {
	for name, s := range hostileTexts {
		for _, max := range []int{0, 1, 5, 256, 1024} {
			got := Bound(s, max)
			head, _, ok := strings.Cut(got, truncatedMarker)
			if !ok {
				t.Fatalf("%s/%d: no truncation marker in %.80q", name, max, got)
			}
			if w := len(jsonString(t, head)); w > max {
				t.Errorf("%s/%d: kept text is %d bytes as JSON", name, max, w)
			}
			if !strings.HasPrefix(s, head) {
				t.Errorf("%s/%d: kept text is not a prefix", name, max)
			}
			if utf8.ValidString(s) && !utf8.ValidString(got) {
				t.Errorf("%s/%d: cut inside a character", name, max)
			}
			if !strings.HasSuffix(got, "500000 bytes)") && len(s) == 500_000 {
				t.Errorf("%s/%d: marker does not give the length: %q", name, max, got[len(head):])
			}
		}
	}
	for _, s := range []string{"", "evt_1", strings.Repeat("x", 256), strings.Repeat(`"`, 128)} {
		if got := Bound(s, 256); got != s {
			t.Errorf("Bound(%q) = %q, want it whole", s, got)
		}
	}
	if got := Bound(strings.Repeat(`"`, 129), 256); !strings.Contains(got, truncatedMarker) {
		t.Errorf("129 quotes (258 bytes written) kept whole")
	}
}

// TestRequestLineStaysUnder2KiBWhateverTheRequestText: an id and an error made
// of 500 KB of hostile text still give a line under 2 KiB, valid JSON and EMF.
func TestRequestLineStaysUnder2KiBWhateverTheRequestText(t *testing.T) {
	for name, s := range hostileTexts {
		var buf bytes.Buffer
		l := NewLogger(&buf, slog.LevelInfo, "webhook-stripe")
		LogRequest(context.Background(), l, Request{
			Provider: "stripe", Outcome: OutcomeError, ID: s, Status: 500, Reason: "processing_failed",
			Err: errors.New("webhook: forward stripe event " + s + ": sink: " + s),
		})
		if n := buf.Len(); n >= 2048 {
			t.Errorf("%s: line of %d bytes", name, n)
		}
		root := validateEMF(t, buf.Bytes())
		for _, member := range []string{"id", "error"} {
			v, _ := root[member].(string)
			if !strings.Contains(v, truncatedMarker) {
				t.Errorf("%s: %s lacks the truncation marker: %.60q", name, member, v)
			}
		}
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
	}
}
