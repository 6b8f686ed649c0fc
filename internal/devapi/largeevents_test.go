package devapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/devapi"
	consumerhandler "github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// TestA2MiBGitHubDeliveryRunsOnceThroughTheLocalAPI posts a signed 2 MiB GitHub delivery six
// times to the local API (make run's, in-process): the first is executed and its payload kept
// in the in-process store that stands in for the payload bucket, the 5 retries are replays, and
// the consumer processes the event once with the whole body.
func TestA2MiBGitHubDeliveryRunsOnceThroughTheLocalAPI(t *testing.T) {
	var mu sync.Mutex
	var processed [][]byte
	var logs testsupport.Buffer
	api, base := startWith(t, devapi.Config{
		Getenv:    func(string) string { return "" },
		LogOutput: &logs,
		Process: func(_ context.Context, e consumerhandler.Event) error {
			mu.Lock()
			defer mu.Unlock()
			processed = append(processed, bytes.Clone(e.Payload))
			return nil
		},
	})

	body, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "repository": map[string]any{"full_name": "idemlambda/demo"},
		"commits": []map[string]string{{"message": strings.Repeat("m", 2<<20)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	const guid = "3f9a8c2e-5d1b-11f0-9a7e-local2mib"
	for i := range 6 { // the first delivery and 5 retries
		signed, err := webhooktest.Sign("github", webhook.DevSecret("github"), webhook.Request{
			Header: http.Header{"X-Github-Delivery": {guid}, "X-Github-Event": {"push"}, "Content-Type": {"application/json"}},
			Body:   body, Now: time.Now(),
		})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/github", bytes.NewReader(signed.Body))
		req.Header = signed.Header
		resp, respBody := testsupport.RoundTrip(t, req)
		if resp.StatusCode != 200 || (resp.Header.Get("idempotent-replayed") == "true") != (i > 0) {
			t.Fatalf("delivery %d: %d, replayed %q: %s", i, resp.StatusCode, resp.Header.Get("idempotent-replayed"), respBody)
		}
	}
	// The consumer runs once the webhook invocation returned: wait for it, with a bound.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(processed)
		mu.Unlock()
		if n > 0 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(processed) != 1 || !bytes.Equal(processed[0], body) {
		t.Fatalf("consumer processed %d events, want 1 with the %d-byte body\n%s", len(processed), len(body), logs.String())
	}
	if keys := api.Payloads.Keys(); len(keys) != 1 || !strings.HasPrefix(keys[0], "github/") {
		t.Errorf("payload store holds %q, want one github object", keys)
	}
	if n := strings.Count(logs.String(), `"outcome":"executed"`); n != 2 {
		t.Errorf("%d executed lines, want the webhook function's and the consumer's:\n%s", n, logs.String())
	}
}
