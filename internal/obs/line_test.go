package obs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// LogRequest writes its line itself on a logger from NewLogger; what it writes must be the
// bytes log/slog writes for the same record, whatever the request holds.
func TestRequestLineIsTheLineSlogWrites(t *testing.T) {
	requests := []Request{
		{Outcome: OutcomeExecuted, Status: 200, Duration: 1234567 * time.Nanosecond, RoundTrips: 2},
		{Provider: "github", Outcome: OutcomeReplayed, ID: "sha256:abc", DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Status: 200, Duration: time.Microsecond, RoundTrips: 1},
		{Provider: "stripe", Outcome: OutcomeError, ID: "evt_1", Status: 500, Reason: "processing_failed", Err: errors.New("sink: \"queue\" <down> & \\ \n\r\t\x01 \u2028\u2029 \xff é")},
		{Outcome: "", Status: 0, Duration: 0},
		{Outcome: OutcomeRejected, ID: strings.Repeat("\x02", 300), Status: 400, Duration: 300 * time.Nanosecond, Err: errors.New(strings.Repeat("é\n", 900))},
		{Outcome: OutcomeExecuted, Status: 200, Duration: 36 * time.Hour},
	}
	for _, with := range [][]slog.Attr{nil, {slog.String("route", "POST /payments"), slog.String("odd \"key\"", "<v>\x00")}} {
		for i, r := range requests {
			var got, want bytes.Buffer
			l := NewLogger(&got, slog.LevelError, "webhook-\"stripe\"")
			plain := slog.NewJSONHandler(&want, nil).WithAttrs([]slog.Attr{slog.String("function", "webhook-\"stripe\"")})
			if with != nil {
				l = l.With(attrsAny(with)...)
				plain = plain.WithAttrs(with)
			}
			if l.Handler().(*functionHandler).out == nil {
				t.Fatal("a logger with string attributes lost its own line encoder")
			}
			LogRequest(context.Background(), l, r)
			line := got.Bytes()
			now, err := time.Parse(time.RFC3339Nano, string(line[len(`{"time":"`):bytes.IndexByte(line[len(`{"time":"`):], '"')+len(`{"time":"`)]))
			if err != nil {
				t.Fatalf("request %d: the line's time: %v\n%s", i, err, line)
			}
			level := slog.LevelInfo
			if r.Outcome == OutcomeError {
				level = slog.LevelError
			}
			_ = plain.Handle(context.Background(), requestRecord(now, level, r, false))
			if got.String() != want.String() {
				t.Errorf("request %d:\n got %s\nwant %s", i, got.String(), want.String())
			}
			validateEMF(t, line)
		}
	}
}

// A logger whose attributes are not all strings, or that opened a group, goes through slog.
func TestRequestLineGoesThroughSlogForOtherAttributes(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, slog.LevelInfo, "payments").With("cold_start", true)
	if l.Handler().(*functionHandler).out != nil {
		t.Fatal("a bool attribute kept the request line's own encoder")
	}
	LogRequest(context.Background(), l, Request{Outcome: OutcomeExecuted, Status: 201, RoundTrips: 2})
	root := validateEMF(t, buf.Bytes())
	if root["cold_start"] != true {
		t.Errorf("cold_start = %v, want true", root["cold_start"])
	}
}

func attrsAny(attrs []slog.Attr) []any {
	out := make([]any, len(attrs))
	for i, a := range attrs {
		out[i] = a
	}
	return out
}

func BenchmarkLogRequest(b *testing.B) {
	l := NewLogger(discard{}, slog.LevelInfo, "webhook-stripe")
	r := Request{Provider: "stripe", Outcome: OutcomeReplayed, ID: "evt_1", Status: 200, Duration: 42 * time.Microsecond, RoundTrips: 1}
	b.ReportAllocs()
	for b.Loop() {
		LogRequest(context.Background(), l, r)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// The attributes of Logger.With reach the lines slog writes, in order, after the function.
func TestLoggerWithKeepsItsAttributesOnOtherLines(t *testing.T) {
	var got, want bytes.Buffer
	l := NewLogger(&got, slog.LevelInfo, "payments").With("route", "POST /payments").With(slog.String("step", "ledger"))
	l.Warn("ledger slow", "ms", 12)
	slog.New(slog.NewJSONHandler(&want, nil)).With("function", "payments", "route", "POST /payments", "step", "ledger").Warn("ledger slow", "ms", 12)
	// The time differs; what follows it must not.
	_, g, _ := strings.Cut(got.String(), `","level"`)
	_, w, _ := strings.Cut(want.String(), `","level"`)
	if g != w {
		t.Errorf("got %s\nwant %s", got.String(), want.String())
	}
	if l.Enabled(context.Background(), slog.LevelDebug) {
		t.Error("a logger at info is enabled for debug")
	}
}
