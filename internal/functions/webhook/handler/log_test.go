package handler

import (
	"strings"
	"testing"
	"time"
)

// Each request, whatever its outcome, logs one line naming the outcome, the id, the status, the
// Redis round trips and the reason, as an EMF document, and no log line holds a secret or
// part of the body.
func TestEachRequestLogsOneLineWithOutcomeIDAndRoundTrips(t *testing.T) {
	hs := newHarness(t, "stripe", harnessConfig{env: map[string]string{"LOG_LEVEL": "error"}})
	d := sampleDelivery(t, "stripe", "evt_1Logged")
	intent := stripeObjectID(t, d.body)

	hs.deliver(t, d)
	hs.clock.Advance(time.Minute)
	hs.deliver(t, d)
	hs.do(t, d.signed(t, otherSecret("stripe"), hs.clock.Now()))
	hs.sink.setErr(errSinkDown)
	hs.deliver(t, sampleDelivery(t, "stripe", "evt_1LoggedFailure"))

	lines := hs.logs.requests(t)
	want := []struct {
		outcome    string
		id         string
		status     float64
		roundTrips float64
		reason     string
		level      string
	}{
		{"executed", "evt_1Logged", 200, 2, "", "INFO"},
		{"replayed", "evt_1Logged", 200, 1, "", "INFO"},
		{"rejected", "", 401, 0, "invalid_signature", "INFO"},
		{"error", "evt_1LoggedFailure", 500, 2, "processing_failed", "ERROR"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d request lines for %d requests:\n%s", len(lines), len(want), hs.logs)
	}
	for i, w := range want {
		l := lines[i]
		id, _ := l["id"].(string)
		reason, _ := l["reason"].(string)
		if l["outcome"] != w.outcome || id != w.id || l["status"] != w.status ||
			l["redis_round_trips"] != w.roundTrips || reason != w.reason || l["level"] != w.level {
			t.Errorf("line %d = %v, want %+v", i, l, w)
		}
		checkRequestLine(t, i, l, "webhook-stripe", "stripe")
	}

	all := hs.logs.String()
	for _, leak := range []string{testSecret("stripe"), otherSecret("stripe"), intent, `"amount"`, "client_secret"} {
		if strings.Contains(all, leak) {
			t.Errorf("the log holds %q (a secret or part of the body):\n%s", leak, all)
		}
	}
}

func TestFunctionNameInLogsComesFromLambda(t *testing.T) {
	hs := newHarness(t, "github", harnessConfig{env: map[string]string{EnvFunctionName: "idem-WebhookGithubFunction-Xyz"}})
	hs.deliver(t, sampleDelivery(t, "github", "0c3a7f4e-name"))
	if l := hs.logs.requests(t)[0]; l["function"] != "idem-WebhookGithubFunction-Xyz" {
		t.Errorf("function = %v", l["function"])
	}
}

// checkRequestLine checks the members every request line i carries: the function and
// provider, a duration, and the EMF metadata that lets CloudWatch count outcomes.
func checkRequestLine(t *testing.T, i int, l map[string]any, function, provider string) {
	t.Helper()
	if l["function"] != function || l["provider"] != provider {
		t.Errorf("line %d function %v provider %v", i, l["function"], l["provider"])
	}
	if ms, ok := l["duration_ms"].(float64); !ok || ms < 0 {
		t.Errorf("line %d duration_ms %v", i, l["duration_ms"])
	}
	// The line is an EMF document, so CloudWatch counts outcomes from it.
	aws, _ := l["_aws"].(map[string]any)
	if aws == nil || aws["CloudWatchMetrics"] == nil || l["requests"] != float64(1) {
		t.Errorf("line %d is not an EMF document: %v", i, l)
	}
}
