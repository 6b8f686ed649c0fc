package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/setting"
)

// emfUnits are the units CloudWatch accepts (MetricDatum.Unit).
var emfUnits = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true, "Bytes": true, "Kilobytes": true,
	"Megabytes": true, "Gigabytes": true, "Terabytes": true, "Bits": true, "Kilobits": true,
	"Megabits": true, "Gigabits": true, "Terabits": true, "Percent": true, "Count": true,
	"Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true,
	"Terabytes/Second": true, "Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true,
	"Gigabits/Second": true, "Terabits/Second": true, "Count/Second": true, "None": true,
}

// validateEMF checks line against the CloudWatch Embedded Metric Format
// specification and returns the decoded root node. The rules checked:
//   - the log event is one JSON object with nothing before or after it, and
//     (our own rule, for unambiguous readers) no member named twice;
//   - the root has an "_aws" object with an integer Timestamp in epoch
//     milliseconds and a CloudWatchMetrics array of MetricDirectives, and no
//     other members;
//   - each MetricDirective has exactly Namespace (a string of 1 to 255
//     characters, outside the reserved "AWS/" prefix), Dimensions (at least
//     one DimensionSet of at most 9 references) and Metrics (at most 100
//     MetricDefinitions);
//   - each dimension reference names a top-level member whose value is a
//     non-empty string of at most 1024 characters;
//   - each MetricDefinition has a Name of 1 to 255 characters naming a
//     top-level member that is a number or an array of at most 100 numbers,
//     and an optional Unit from CloudWatch's list.
func validateEMF(t *testing.T, line []byte) map[string]any {
	t.Helper()
	root := decodeLogEvent(t, line)
	aws := object(t, "_aws", root["_aws"], "Timestamp", "CloudWatchMetrics")
	checkEMFTimestamp(t, aws["Timestamp"])
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		t.Fatalf("_aws.CloudWatchMetrics is not a non-empty array: %v", aws["CloudWatchMetrics"])
	}
	for _, d := range directives {
		dir := object(t, "MetricDirective", d, "Namespace", "Dimensions", "Metrics")
		ns, _ := dir["Namespace"].(string)
		if len(ns) < 1 || len(ns) > 255 || strings.HasPrefix(ns, "AWS/") {
			t.Errorf("Namespace %q invalid", ns)
		}
		checkDimensionSets(t, root, dir["Dimensions"])
		checkMetricDefinitions(t, root, dir["Metrics"])
	}
	return root
}

// decodeLogEvent returns the one JSON object line holds, failing unless line is that object
// and a newline, with no member named twice.
func decodeLogEvent(t *testing.T, line []byte) map[string]any {
	t.Helper()
	if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("want exactly one newline-terminated line, got %q", line)
	}
	checkNoDuplicateMembers(t, line)
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		t.Fatalf("line is not a JSON object: %v\n%s", err, line)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("data after the JSON object: %s", line)
	}
	return root
}

// checkEMFTimestamp fails t unless v, _aws.Timestamp, is an integer of epoch milliseconds
// within the last minute.
func checkEMFTimestamp(t *testing.T, v any) {
	t.Helper()
	ts, ok := v.(json.Number)
	if !ok {
		t.Fatalf("_aws.Timestamp is not a number: %v", v)
	}
	ms, err := ts.Int64()
	if err != nil {
		t.Fatalf("_aws.Timestamp is not an integer: %v", ts)
	}
	if d := time.Since(time.UnixMilli(ms)); d < 0 || d > time.Minute {
		t.Errorf("_aws.Timestamp %d is not epoch milliseconds of now", ms)
	}
}

// checkDimensionSets fails t unless v, a directive's Dimensions, is a non-empty array of
// DimensionSets of at most 9 references, each naming a non-empty top-level string of root.
func checkDimensionSets(t *testing.T, root map[string]any, v any) {
	t.Helper()
	sets, ok := v.([]any)
	if !ok || len(sets) == 0 {
		t.Fatalf("Dimensions is not a non-empty array: %v", v)
	}
	for _, s := range sets {
		set, ok := s.([]any)
		if !ok || len(set) > 9 {
			t.Fatalf("DimensionSet invalid: %v", s)
		}
		for _, ref := range set {
			name, ok := ref.(string)
			if !ok || len(name) < 1 || len(name) > 255 {
				t.Fatalf("dimension reference invalid: %v", ref)
			}
			v, ok := root[name].(string)
			if !ok || strings.TrimSpace(v) == "" || len(v) > 1024 {
				t.Errorf("dimension target %q must be a non-empty top-level string, got %#v", name, root[name])
			}
		}
	}
}

// checkMetricDefinitions fails t unless v, a directive's Metrics, is an array of at most 100
// MetricDefinitions, each naming a top-level metric value of root, with an optional Unit from
// CloudWatch's list.
func checkMetricDefinitions(t *testing.T, root map[string]any, v any) {
	t.Helper()
	metrics, ok := v.([]any)
	if !ok || len(metrics) > 100 {
		t.Fatalf("Metrics invalid: %v", v)
	}
	for _, m := range metrics {
		def := object(t, "MetricDefinition", m, "Name", "Unit", "StorageResolution")
		name, ok := def["Name"].(string)
		if !ok || len(name) < 1 || len(name) > 255 {
			t.Fatalf("metric Name invalid: %v", def["Name"])
		}
		if u, present := def["Unit"]; present {
			if s, ok := u.(string); !ok || !emfUnits[s] {
				t.Errorf("metric %s has invalid Unit %v", name, u)
			}
		}
		checkMetricValue(t, name, root[name])
	}
}

// checkMetricValue fails t unless v, the top-level member of metric name, is a number or an
// array of at most 100 numbers.
func checkMetricValue(t *testing.T, name string, v any) {
	t.Helper()
	switch v := v.(type) {
	case json.Number:
	case []any:
		if len(v) > 100 {
			t.Errorf("metric %s has %d values, at most 100 allowed", name, len(v))
		}
		for _, x := range v {
			if _, ok := x.(json.Number); !ok {
				t.Errorf("metric %s array holds a non-number %v", name, x)
			}
		}
	default:
		t.Errorf("metric target %q must be a top-level number, got %#v", name, v)
	}
}

// object returns v as a JSON object, failing unless it is one whose members are all allowed.
func object(t *testing.T, what string, v any, allowed ...string) map[string]any {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object: %v", what, v)
	}
	for k := range obj {
		found := false
		for _, a := range allowed {
			found = found || k == a
		}
		if !found {
			t.Errorf("%s has member %q, which the specification does not define", what, k)
		}
	}
	return obj
}

// checkNoDuplicateMembers fails if the top-level object names a member twice,
// which encoding/json would silently resolve to the last one.
func checkNoDuplicateMembers(t *testing.T, line []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("line does not start with an object: %q", line)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		key := tok.(string)
		if seen[key] {
			t.Errorf("member %q appears twice: %s", key, line)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRequestLineIsAValidEMFDocumentForEveryOutcome(t *testing.T) {
	outcomes := []struct {
		outcome string
		level   string
	}{
		{OutcomeExecuted, "INFO"},
		{OutcomeReplayed, "INFO"},
		{OutcomeInProgress, "INFO"},
		{OutcomeMismatch, "INFO"},
		{OutcomeRejected, "INFO"},
		{OutcomeError, "ERROR"},
	}
	for _, tc := range outcomes {
		t.Run(tc.outcome, func(t *testing.T) {
			var buf bytes.Buffer
			l := NewLogger(&buf, slog.LevelInfo, "webhook-stripe")
			r := Request{
				Function:   "webhook-stripe",
				Provider:   "stripe",
				Outcome:    tc.outcome,
				ID:         "evt_1NG8Du2eZvKYlo2CUI79vXWy",
				Status:     200,
				Duration:   12345 * time.Microsecond,
				RoundTrips: 2,
			}
			if tc.outcome == OutcomeError {
				r.Status, r.Reason, r.Err = 500, "sink_failed", errors.New("sqs send: boom")
			}
			LogRequest(context.Background(), l, r)

			root := validateEMF(t, buf.Bytes())
			want := map[string]any{
				"level":             tc.level,
				"msg":               "request",
				"function":          "webhook-stripe",
				"provider":          "stripe",
				"outcome":           tc.outcome,
				"id":                "evt_1NG8Du2eZvKYlo2CUI79vXWy",
				"status":            json.Number(map[bool]string{true: "500", false: "200"}[tc.outcome == OutcomeError]),
				"duration_ms":       json.Number("12.345"),
				"redis_round_trips": json.Number("2"),
				"requests":          json.Number("1"),
			}
			for k, v := range want {
				if root[k] != v {
					t.Errorf("%s = %#v, want %#v", k, root[k], v)
				}
			}
			if tc.outcome == OutcomeError {
				if root["reason"] != "sink_failed" || root["error"] != "sqs send: boom" {
					t.Errorf("reason/error = %v / %v", root["reason"], root["error"])
				}
			} else if _, ok := root["error"]; ok {
				t.Errorf("error member on a %s line", tc.outcome)
			}
			dir := root["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
			// Users' dashboards and alarms find the metrics under this name: changing it breaks them.
			if dir["Namespace"] != "Idem" {
				t.Errorf("Namespace = %v, want Idem", dir["Namespace"])
			}
			if got := mustJSON(dir["Dimensions"]); got != `[["function","outcome"]]` {
				t.Errorf("Dimensions = %s", got)
			}
			if got := mustJSON(dir["Metrics"]); got != `[{"Name":"requests","Unit":"Count"},{"Name":"duration_ms","Unit":"Milliseconds"},{"Name":"redis_round_trips","Unit":"Count"}]` {
				t.Errorf("Metrics = %s", got)
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRequestLineNamesTheFunctionOnceWhenTheLoggerCarriesIt(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, slog.LevelInfo, "payments").With("cold_start", true)
	LogRequest(context.Background(), l, Request{Function: "something-else", Outcome: OutcomeReplayed, Status: 201, RoundTrips: 1})

	root := validateEMF(t, buf.Bytes())
	if root["function"] != "payments" {
		t.Errorf("function = %v, want the logger's", root["function"])
	}
	if _, ok := root["provider"]; ok {
		t.Error("empty provider should be omitted")
	}
}

func TestRequestLineOnAPlainLoggerUsesRequestFunctionOrUnknown(t *testing.T) {
	for _, fn := range []string{"webhook-github", ""} {
		var buf bytes.Buffer
		l := slog.New(slog.NewJSONHandler(&buf, nil))
		LogRequest(context.Background(), l, Request{Function: fn, Provider: "github", Status: 401, Reason: "invalid_signature"})

		root := validateEMF(t, buf.Bytes())
		want := fn
		if want == "" {
			want = "unknown"
		}
		if root["function"] != want || root["outcome"] != "unknown" {
			t.Errorf("function/outcome = %v/%v, want %s/unknown", root["function"], root["outcome"], want)
		}
	}
}

func TestRequestLineIsWrittenWhateverTheLogLevel(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, slog.LevelError, "webhook-slack")
	l.Info("an ordinary info line is filtered")
	LogRequest(context.Background(), l, Request{Outcome: OutcomeExecuted, Status: 200, RoundTrips: 2})

	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("got %d lines, want only the request line:\n%s", n, buf.String())
	}
	validateEMF(t, buf.Bytes())
}

func TestNewLoggerFiltersByLevelAndAddsFunction(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, slog.LevelWarn, "webhook-shopify")
	l.Info("dropped")
	l.Warn("kept", "k", "v")

	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("want one JSON line, got %q: %v", buf.String(), err)
	}
	if got["msg"] != "kept" || got["function"] != "webhook-shopify" || got["level"] != "WARN" {
		t.Errorf("line = %v", got)
	}
}

func TestParseLevel(t *testing.T) {
	cases := []struct {
		in   string
		want slog.Level
	}{
		{"", slog.LevelInfo},
		{"debug", slog.LevelDebug},
		{"info", slog.LevelInfo},
		{"warn", slog.LevelWarn},
		{"error", slog.LevelError},
		{" DEBUG ", slog.LevelDebug},
		{"Warn", slog.LevelWarn},
	}
	for _, tc := range cases {
		got, err := ParseLevel(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"verbose", "trace", "0", "warning!", "fatal"} {
		_, err := ParseLevel(bad)
		if err == nil {
			t.Errorf("ParseLevel(%q) accepted an unknown level", bad)
			continue
		}
		if !strings.Contains(err.Error(), "LOG_LEVEL") {
			t.Errorf("ParseLevel(%q) error %q does not name LOG_LEVEL", bad, err)
		}
	}
}

func TestLevelFromEnvNamesTheVariable(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string { return map[string]string{EnvLogLevel: v}[k] }
	}
	if got, err := LevelFromEnv(env(" Debug")); err != nil || got != slog.LevelDebug {
		t.Errorf("LevelFromEnv(Debug) = %v, %v", got, err)
	}
	_, err := LevelFromEnv(env("loud"))
	var se *setting.Error
	if !errors.As(err, &se) || se.Var != EnvLogLevel || !strings.Contains(err.Error(), `"loud"`) {
		t.Errorf("LevelFromEnv(loud) = %v, want a *setting.Error naming %s and the value", err, EnvLogLevel)
	}
}

func TestServedWritesOneLineWithTheDurationOfServe(t *testing.T) {
	var buf bytes.Buffer
	resp := Served(context.Background(), NewLogger(&buf, slog.LevelInfo, "payments"), func() (string, Request) {
		time.Sleep(20 * time.Millisecond)
		return "answer", Request{Outcome: OutcomeExecuted, Status: 201, Duration: time.Hour}
	})
	root := validateEMF(t, buf.Bytes())
	ms, _ := root["duration_ms"].(json.Number).Float64()
	if resp != "answer" || root["status"] != json.Number("201") || ms < 20 || ms > 60_000 {
		t.Errorf("response %q, line %v: want the response back and the line with the time serve took", resp, root)
	}
}

func TestKeyIDIsShortStableAndHidesTheKey(t *testing.T) {
	key := "order-7f3a9c-customer@example.com"
	id := KeyID(key)
	if len(id) != 16 || strings.Contains(id, "order") {
		t.Errorf("KeyID(%q) = %q", key, id)
	}
	if KeyID(key) != id || KeyID(key+"x") == id {
		t.Error("KeyID must be stable and distinguish keys")
	}
}
