package handler

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// maxLogLine is the bound every log line of the handler must keep, whatever a request holds.
const maxLogLine = 2048

// lineBound is an io.Writer for the handler's log that records the longest line written
// (log/slog writes one line per Write).
type lineBound struct {
	mu      sync.Mutex
	longest int
	last    []byte
}

// longestLine is the length of the longest line written so far, and its first 300 bytes.
func (w *lineBound) longestLine() (int, []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest, w.last
}

// withOtherUnsigned is headers with the unsigned delivery id and event type headers of
// GitHub and Shopify set to deliveryID and eventType.
func withOtherUnsigned(headers map[string]string, deliveryID, eventType string) map[string]string {
	resent := maps.Clone(headers)
	for _, h := range []string{"x-github-delivery", "x-shopify-webhook-id", "x-shopify-event-id"} {
		resent[h] = deliveryID
	}
	for _, h := range []string{"x-github-event", "x-shopify-topic"} {
		resent[h] = eventType
	}
	return resent
}

func (w *lineBound) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(p) > w.longest {
		w.longest, w.last = len(p), bytes.Clone(p[:min(len(p), 300)])
	}
	return len(p), nil
}

// checkUntouched checks that a delivery the test did not sign sent no Redis command past
// commands and no event to the sink past sent.
func checkUntouched(t *testing.T, name string, mr *miniredis.Miniredis, hs *harness, commands, sent int) {
	t.Helper()
	if n := mr.CommandCount() - commands; n != 0 {
		t.Fatalf("%s: %d Redis commands for a delivery the test did not sign", name, n)
	}
	if n := len(hs.sink.sent()) - sent; n != 0 {
		t.Fatalf("%s: %d sink events for a delivery the test did not sign", name, n)
	}
}

// signedIdentity is the dedupe identity a verified delivery must get, computed here from the
// bytes the test signed, independently of the provider code: the body's digest where only the
// body is signed, the signed webhook-id for Standard Webhooks, and the id member of the body,
// read strictly, for Stripe and Slack.
func signedIdentity(provider string, body []byte, signedID string) (string, bool) {
	switch provider {
	case "github", "shopify":
		return bodyDigest(body), true
	case "zoom":
		// Zoom signs v0:<timestamp>:<body>; its key is the digest of that without the
		// timestamp, the same for every retry.
		return bodyDigest(append([]byte("v0::"), body...)), true
	case "standard", "twitch":
		return signedID, true
	}
	member := map[string]string{"stripe": "id", "slack": "event_id", "discord": "id", "paddle": "event_id"}[provider]
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return "", false
	}
	raw, ok := obj[member]
	if !ok || !utf8.Valid(raw) {
		return "", false
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		return "", false
	}
	return id, true
}

// FuzzHandlerPath drives whole requests, API Gateway v2.0 event in and response out, through
// every provider's handler on miniredis, counting the commands the server receives. For each
// input it asserts:
//   - with signature headers taken from the input (never valid: the fuzzer never sees the
//     secret, and an HMAC cannot be found by mutation), no Redis command and no sink event;
//   - with the body signed here, any event that reaches the sink has the identity computed
//     from the signed bytes (signedIdentity), and the same signed bytes re-sent under other
//     unsigned headers (delivery id, event type) reach the sink no more;
//   - no log line is longer than maxLogLine.
//
// Each input runs a whole request, so minimizing a new input takes long at the default
// -fuzzminimizetime; a short one (go test -fuzz FuzzHandlerPath -fuzzminimizetime 2s) keeps
// the executions counting.
func FuzzHandlerPath(f *testing.F) {
	type env struct {
		hs *harness
		mr *miniredis.Miniredis
		lw *lineBound
	}
	envs := map[string]env{}
	// The five original senders and a few presets of other families and handshakes.
	names := []string{"github", "shopify", "slack", "standard", "stripe", "discord", "paddle", "twitch", "zoom"}
	for _, name := range names {
		mr := miniredis.RunT(f)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		f.Cleanup(func() { rdb.Close() })
		lw := &lineBound{}
		hs := newHarness(f, name, harnessConfig{rdb: rdb, prefix: "idem", opts: []Option{WithLogOutput(lw)}})
		envs[name] = env{hs: hs, mr: mr, lw: lw}
	}
	for i, name := range names {
		body, headers := signer(f, name).Sample("evt_fuzz_"+name, fixedNow)
		f.Add(uint8(i), true, false, body, headers["content-type"], "delivery-1", "type-1", "", "", "")
		f.Add(uint8(i), false, true, body, "application/json", "delivery-1", "type-1", "v1,AAAA", "t=1,v1=00", "1772366400")
	}
	f.Add(uint8(0), true, false, []byte(`{"id":"A","id":"B"}`), "application/json", "", "", "", "", "")
	f.Add(uint8(4), true, false, []byte(`{"id":"evt_\ud800","type":"x"}`), "application/json", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, pick uint8, sign, encode bool, body []byte, contentType, deliveryID, eventType, sig1, sig2, ts string) {
		name := names[int(pick)%len(names)]
		e := envs[name]
		p := signer(t, name)
		secret := testSecret(name)

		// The unsigned headers a provider's deliveries carry, all from the input.
		headers := map[string]string{
			"content-type":         contentType,
			"x-github-delivery":    deliveryID,
			"x-github-event":       eventType,
			"x-shopify-webhook-id": deliveryID,
			"x-shopify-topic":      eventType,
		}
		signedID := ""
		if sign {
			signature := p.Sign(secret, body, fixedNow)
			signedID = signature[p.preset.IDHeader]
			maps.Copy(headers, signature)
		} else {
			maps.Copy(headers, map[string]string{
				"stripe-signature":          sig2,
				"x-hub-signature-256":       sig2,
				"x-shopify-hmac-sha256":     sig1,
				"webhook-id":                deliveryID,
				"webhook-timestamp":         ts,
				"webhook-signature":         sig1,
				"x-slack-signature":         sig2,
				"x-slack-request-timestamp": ts,
			})
		}
		send := func(headers map[string]string) {
			req := apiRequest(t, name, body, headers)
			if encode {
				req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
			}
			resp, err := invoke(e.hs.h, req)
			if err != nil || resp.StatusCode == 0 || !json.Valid([]byte(resp.Body)) {
				t.Fatalf("%s: response %d %q, error %v", name, resp.StatusCode, resp.Body, err)
			}
		}

		commands, sent := e.mr.CommandCount(), len(e.hs.sink.sent())
		send(headers)
		if !sign {
			checkUntouched(t, name, e.mr, e.hs, commands, sent)
		}
		events := e.hs.sink.sent()
		if len(events) > sent {
			ev := events[len(events)-1]
			want, ok := signedIdentity(name, body, signedID)
			if !ok || ev.ID != want {
				t.Fatalf("%s: executed with key %q, want %q from the signed bytes", name, ev.ID, want)
			}
			// The same signed bytes under other unsigned headers are not a new event.
			send(withOtherUnsigned(headers, "replay-"+deliveryID, "other-"+eventType))
			if n := len(e.hs.sink.sent()); n != len(events) {
				t.Fatalf("%s: the signed bytes re-sent under other unsigned headers reached the sink again", name)
			}
		}
		if longest, line := e.lw.longestLine(); longest > maxLogLine {
			t.Fatalf("%s: log line of %d bytes: %s", name, longest, line)
		}
	})
}
