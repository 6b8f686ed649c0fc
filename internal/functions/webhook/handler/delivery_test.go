package handler

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// Each sender's first delivery is forwarded once, as delivered and keyed on signed bytes, and
// answered with a receipt; its retries, signed again later, get the same receipt, replayed.
func TestFirstDeliveryIsForwardedOnceAndRetriesAreReplayed(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		hs := newHarness(t, pc.name, harnessConfig{})
		id := pc.eventID("first")
		d := sampleDelivery(t, pc.name, id)

		first := hs.deliver(t, d)
		wantReceipt(t, first, id)
		if v, ok := first.Headers[idemhttp.HeaderReplayed]; ok {
			t.Errorf("first delivery carries %s: %q", idemhttp.HeaderReplayed, v)
		}
		sent := hs.sink.sent()
		if len(sent) != 1 {
			t.Fatalf("sink got %d events, want 1", len(sent))
		}
		checkForwarded(t, pc, d, id, sent[0])

		// Each retry is signed again, with a later timestamp, over the same body.
		for i := range 3 {
			hs.clock.Advance(4 * time.Minute)
			retry := hs.deliver(t, d)
			wantStatus(t, retry, 200, "")
			if retry.Body != first.Body {
				t.Errorf("retry %d body %s, want %s", i, retry.Body, first.Body)
			}
			if got := retry.Headers[idemhttp.HeaderReplayed]; got != "true" {
				t.Errorf("retry %d %s = %q, want true", i, idemhttp.HeaderReplayed, got)
			}
		}
		if n := hs.sink.attempts(); n != 1 {
			t.Errorf("sink called %d times, want 1", n)
		}
	})
}

// checkForwarded checks e, the event delivery d of id reached pc's sink as: its
// provider, ids, type and object, its key from signed bytes, its body as delivered, received
// at fixedNow.
func checkForwarded(t *testing.T, pc providerCase, d delivery, id string, e sink.Event) {
	t.Helper()
	if e.Provider != pc.name || senderID(e) != id || e.Type == "" || e.ObjectID == "" {
		t.Errorf("sink event = {Provider:%q ID:%q Type:%q ObjectID:%q}", e.Provider, e.ID, e.Type, e.ObjectID)
	}
	// The key comes from signed bytes; what came from unsigned headers is named.
	switch {
	case pc.bodyKeyed:
		if e.ID != bodyDigest(d.body) || !slices.Equal(e.Unsigned, []string{"delivery_id", "type"}) {
			t.Errorf("sink event ID %q Unsigned %v, want the body digest with delivery_id and type unsigned", e.ID, e.Unsigned)
		}
	case e.DeliveryID != "" || len(e.Unsigned) != 0:
		t.Errorf("sink event DeliveryID %q Unsigned %v, want neither", e.DeliveryID, e.Unsigned)
	}
	if !bytes.Equal(e.Body, d.body) {
		t.Errorf("sink body differs from the delivered body")
	}
	if !e.ReceivedAt.Equal(fixedNow) {
		t.Errorf("ReceivedAt = %v, want %v", e.ReceivedAt, fixedNow)
	}
}

func TestConcurrentDeliveriesFromSeparateEnvironmentsForwardOnce(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		const environments = 8
		prefix := keyPrefix(t)
		// The sink is slow enough that the other deliveries arrive while the first runs.
		shared := &recordingSink{delay: 50 * time.Millisecond}
		envs := make([]*harness, environments)
		for i := range envs {
			envs[i] = newHarness(t, pc.name, harnessConfig{prefix: prefix, sink: shared})
		}

		for round := range 3 {
			id := pc.eventID(fmt.Sprintf("race%d", round))
			d := sampleDelivery(t, pc.name, id)
			reqs := make([]events.APIGatewayV2HTTPRequest, environments)
			for i := range reqs {
				reqs[i] = d.signed(t, testSecret(pc.name), fixedNow.Add(time.Duration(i)*time.Second))
			}
			resps := make([]events.APIGatewayV2HTTPResponse, environments)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range envs {
				wg.Go(func() {
					<-start
					resps[i], _ = invoke(envs[i].h, reqs[i])
				})
			}
			close(start)
			wg.Wait()

			ok, busy := 0, 0
			for i, r := range resps {
				switch r.StatusCode {
				case 200:
					ok++
					wantReceipt(t, r, id)
				case 409:
					busy++
					wantStatus(t, r, 409, "in_progress")
					if r.Headers["retry-after"] == "" {
						t.Errorf("environment %d: 409 without retry-after", i)
					}
				default:
					t.Errorf("environment %d: status %d %s", i, r.StatusCode, r.Body)
				}
			}
			if got := len(shared.sent()); got != round+1 {
				t.Fatalf("round %d: sink has %d events, want %d: forwarded more than once", round, got, round+1)
			}
			if ok == 0 {
				t.Errorf("round %d: no environment answered 200 (%d answered 409)", round, busy)
			}
			late := envs[round].deliver(t, d)
			wantReceipt(t, late, id)
			if late.Headers[idemhttp.HeaderReplayed] != "true" {
				t.Errorf("round %d: late delivery not replayed", round)
			}
		}
		if n := shared.attempts(); n != 3 {
			t.Errorf("sink called %d times for 3 events", n)
		}
	})
}

func TestUnverifiedDeliveriesAreRejectedWithoutTouchingRedis(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		hs := newHarness(t, pc.name, harnessConfig{})
		d := sampleDelivery(t, pc.name, pc.eventID("forged"))
		secret := testSecret(pc.name)
		now := hs.clock.Now()

		type attempt struct {
			name string
			req  events.APIGatewayV2HTTPRequest
			code string
		}
		tampered := d.signed(t, secret, now)
		tampered.Body = strings.Replace(tampered.Body, "e", "E", 1)
		attempts := []attempt{
			{"tampered body", tampered, "invalid_signature"},
			{"unsigned", apiRequest(t, pc.name, d.body, d.headers), "missing_signature"},
			{"wrong secret", d.signed(t, otherSecret(pc.name), now), "invalid_signature"},
		}
		if pc.timestamped {
			attempts = append(attempts,
				attempt{"stale", d.signed(t, secret, now.Add(-6*time.Minute)), "timestamp_out_of_tolerance"},
				attempt{"from the future", d.signed(t, secret, now.Add(6*time.Minute)), "timestamp_out_of_tolerance"},
			)
		}
		for _, a := range attempts {
			resp := hs.do(t, a.req)
			wantStatus(t, resp, 401, a.code)
			if !t.Failed() {
				t.Logf("%s: 401 %s", a.name, a.code)
			}
		}

		if n, dials := hs.counter.Commands.Load(), hs.counter.Dials.Load(); n != 0 || dials != 0 {
			t.Errorf("rejected deliveries sent %d Redis commands over %d new connections, want none", n, dials)
		}
		if n := hs.sink.attempts(); n != 0 {
			t.Errorf("sink called %d times", n)
		}
		lines := hs.logs.requests(t)
		if len(lines) != len(attempts) {
			t.Fatalf("%d request log lines for %d requests", len(lines), len(attempts))
		}
		for _, l := range lines {
			if l["outcome"] != "rejected" || l["redis_round_trips"] != float64(0) || l["status"] != float64(401) {
				t.Errorf("log line %v", l)
			}
		}

		// The genuine delivery still goes through afterwards.
		wantReceipt(t, hs.deliver(t, d), pc.eventID("forged"))
	})
}

func TestMalformedDeliveriesAreRejectedWithoutTouchingRedis(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		hs := newHarness(t, pc.name, harnessConfig{})
		secret := testSecret(pc.name)
		now := hs.clock.Now()
		d := sampleDelivery(t, pc.name, pc.eventID("malformed"))

		notJSON := delivery{provider: pc.name, body: []byte("event=payment&id=1"), headers: d.headers}
		wantStatus(t, hs.do(t, notJSON.signed(t, secret, now)), 400, "invalid_payload")
		array := delivery{provider: pc.name, body: []byte(`[{"id":"evt_1"}]`), headers: d.headers}
		wantStatus(t, hs.do(t, array.signed(t, secret, now)), 400, "invalid_payload")

		if pc.withoutEventID != nil {
			headers := map[string]string{}
			for k, v := range d.headers {
				headers[k] = v
			}
			noID := delivery{provider: pc.name, headers: headers}
			noID.body = pc.withoutEventID(t, d.body, noID.headers)
			wantStatus(t, hs.do(t, noID.signed(t, secret, now)), 400, "missing_event_id")
		}

		// Over the 6 MiB default, as sent and base64-encoded.
		padded := delivery{provider: pc.name, headers: d.headers,
			body: append(bytes.Clone(d.body), bytes.Repeat([]byte(" "), defaultBodyLimit+1-len(d.body))...)}
		wantStatus(t, hs.do(t, padded.signed(t, secret, now)), 413, "body_too_large")
		encoded := padded.signed(t, secret, now)
		encoded.Body, encoded.IsBase64Encoded = base64.StdEncoding.EncodeToString(padded.body), true
		wantStatus(t, hs.do(t, encoded), 413, "body_too_large")

		badBase64 := d.signed(t, secret, now)
		badBase64.IsBase64Encoded = true
		wantStatus(t, hs.do(t, badBase64), 400, "invalid_encoding")

		if n, dials := hs.counter.Commands.Load(), hs.counter.Dials.Load(); n != 0 || dials != 0 {
			t.Errorf("malformed deliveries sent %d Redis commands over %d new connections, want none", n, dials)
		}
		if n := hs.sink.attempts(); n != 0 {
			t.Errorf("sink called %d times", n)
		}
	})
}

// TestUnstorableEventIDIsRejectedWithoutTouchingRedis uses Stripe, whose key is the event id
// in the body; GitHub's delivery id, unsigned, is no longer a key.
func TestUnstorableEventIDIsRejectedWithoutTouchingRedis(t *testing.T) {
	hs := newHarness(t, "stripe", harnessConfig{})
	d := sampleDelivery(t, "stripe", strings.Repeat("a", 2000))
	wantStatus(t, hs.deliver(t, d), 400, "invalid_event_id")
	if n := hs.counter.Commands.Load(); n != 0 {
		t.Errorf("%d Redis commands for an unusable event id", n)
	}
	l := hs.logs.requests(t)[0]
	if id, _ := l["id"].(string); l["outcome"] != "rejected" || l["reason"] != "invalid_event_id" || len(id) > 300 || !strings.HasPrefix(id, "aaaa") {
		t.Errorf("log line %v, want the rejection with the id cut short", l)
	}
}

func TestBodyLimitComesFromWebhookMaxBody(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		d := sampleDelivery(t, pc.name, pc.eventID("limit"))
		tight := newHarness(t, pc.name, harnessConfig{env: map[string]string{EnvMaxBody: fmt.Sprint(len(d.body) - 1)}})
		wantStatus(t, tight.deliver(t, d), 413, "body_too_large")
		exact := newHarness(t, pc.name, harnessConfig{env: map[string]string{EnvMaxBody: fmt.Sprint(len(d.body))}})
		wantReceipt(t, exact.deliver(t, d), pc.eventID("limit"))
	})
}

func TestBase64BodyIsDecodedBeforeVerification(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		hs := newHarness(t, pc.name, harnessConfig{})
		id := pc.eventID("b64")
		d := sampleDelivery(t, pc.name, id)

		// The signature covers the raw bytes; the flag says the text is their base64.
		unflagged := d.signed(t, testSecret(pc.name), hs.clock.Now())
		unflagged.Body = base64.StdEncoding.EncodeToString(d.body)
		wantStatus(t, hs.do(t, unflagged), 401, "invalid_signature")

		req := d.signed(t, testSecret(pc.name), hs.clock.Now())
		req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(d.body), true
		wantReceipt(t, hs.do(t, req), id)
		sent := hs.sink.sent()
		if len(sent) != 1 || !bytes.Equal(sent[0].Body, d.body) {
			t.Fatalf("sink got %d events; want the decoded body once", len(sent))
		}
		// A retry sent without encoding is the same delivery.
		hs.clock.Advance(time.Minute)
		if got := hs.deliver(t, d).Headers[idemhttp.HeaderReplayed]; got != "true" {
			t.Errorf("plain retry of a base64 delivery not replayed")
		}
	})
}

func TestEverySecretOfARotationIsAccepted(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		oldSecret, newSecret := "old-"+pc.name, "new-"+pc.name
		if pc.name == "standard" {
			oldSecret, newSecret = otherSecret("standard"), testSecret("standard")
		}
		hs := newHarness(t, pc.name, harnessConfig{env: map[string]string{EnvSecret: oldSecret + " , " + newSecret + ","}})
		now := hs.clock.Now()

		a := sampleDelivery(t, pc.name, pc.eventID("old"))
		wantReceipt(t, hs.do(t, a.signed(t, oldSecret, now)), pc.eventID("old"))
		b := sampleDelivery(t, pc.name, pc.eventID("new"))
		wantReceipt(t, hs.do(t, b.signed(t, newSecret, now)), pc.eventID("new"))
		// A retry signed after the sender switched secrets is still the same event.
		if got := hs.do(t, a.signed(t, newSecret, now.Add(time.Minute))).Headers[idemhttp.HeaderReplayed]; got != "true" {
			t.Errorf("retry signed with the new secret not replayed")
		}
		third := "third-" + pc.name
		if pc.name == "standard" {
			third = "whsec_dGhpcmQ="
		}
		c := sampleDelivery(t, pc.name, pc.eventID("third"))
		wantStatus(t, hs.do(t, c.signed(t, third, now)), 401, "invalid_signature")
		if n := hs.sink.attempts(); n != 2 {
			t.Errorf("sink called %d times, want 2", n)
		}
	})
}

func TestSlackURLVerificationIsAnsweredWithoutRedis(t *testing.T) {
	hs := newHarness(t, "slack", harnessConfig{})
	var req events.APIGatewayV2HTTPRequest
	readJSON(t, "testdata/deliveries/slack_url_verification.json", &req)

	resp := hs.do(t, req)
	wantStatus(t, resp, 200, "")
	var body struct{ Challenge string }
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || body.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("body %s, want the challenge", resp.Body)
	}

	unsigned := req
	unsigned.Headers = map[string]string{"content-type": "application/json"}
	wantStatus(t, hs.do(t, unsigned), 401, "missing_signature")

	if n := hs.counter.Commands.Load(); n != 0 {
		t.Errorf("%d Redis commands for url_verification", n)
	}
	if n := hs.sink.attempts(); n != 0 {
		t.Errorf("sink called %d times", n)
	}
	if l := hs.logs.requests(t)[0]; l["outcome"] != "handshake" || l["reason"] != "url_verification" {
		t.Errorf("log line %v", l)
	}
}

func TestWrongMethodOrRouteIsRejected(t *testing.T) {
	hs := newHarness(t, "stripe", harnessConfig{})
	d := sampleDelivery(t, "stripe", "evt_1Route")

	get := d.signed(t, testSecret("stripe"), fixedNow)
	get.RequestContext.HTTP.Method, get.RouteKey = "GET", "GET /webhooks/stripe"
	resp := hs.do(t, get)
	wantStatus(t, resp, 405, "method_not_allowed")
	if resp.Headers["allow"] != "POST" {
		t.Errorf("allow = %q", resp.Headers["allow"])
	}

	other := d.signed(t, testSecret("stripe"), fixedNow)
	other.RawPath, other.RequestContext.HTTP.Path = "/webhooks/github", "/webhooks/github"
	wantStatus(t, hs.do(t, other), 404, "not_found")
	if n := hs.counter.Commands.Load(); n != 0 {
		t.Errorf("%d Redis commands for a wrong route", n)
	}

	// A named stage prefixes the path.
	staged := d.signed(t, testSecret("stripe"), fixedNow)
	staged.RawPath, staged.RequestContext.HTTP.Path = "/prod/webhooks/stripe", "/prod/webhooks/stripe"
	wantReceipt(t, hs.do(t, staged), "evt_1Route")
}

// TestSameEventIDWithDifferentPayloadIsRefused: for a provider whose signature covers its id.
// GitHub's and Shopify's ids are unsigned headers, so for them another signed body is another
// event, whatever delivery id comes with it.
func TestSameEventIDWithDifferentPayloadIsRefused(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		hs := newHarness(t, pc.name, harnessConfig{})
		id := pc.eventID("reused")
		wantReceipt(t, hs.deliver(t, sampleDelivery(t, pc.name, id)), id)

		// The same id on an event created an hour later: another payload.
		body, headers := signer(t, pc.name).Sample(id, fixedNow.Add(time.Hour))
		other := delivery{provider: pc.name, body: body, headers: headers}
		hs.clock.Advance(time.Minute)
		if pc.bodyKeyed {
			wantReceipt(t, hs.deliver(t, other), id)
			if n := hs.sink.attempts(); n != 2 {
				t.Errorf("sink called %d times, want 2", n)
			}
			return
		}
		wantStatus(t, hs.deliver(t, other), 422, "event_id_reused")
		if n := hs.sink.attempts(); n != 1 {
			t.Errorf("sink called %d times, want 1", n)
		}
		lines := hs.logs.requests(t)
		if l := lines[len(lines)-1]; l["outcome"] != "mismatch" || l["id"] != id {
			t.Errorf("log line %v", l)
		}
	})
}

func TestStripeRetryRenderedDifferentlyIsReplayed(t *testing.T) {
	hs := newHarness(t, "stripe", harnessConfig{})
	d := sampleDelivery(t, "stripe", "evt_1Rendered")
	wantReceipt(t, hs.deliver(t, d), "evt_1Rendered")

	// Compact JSON, another pending_webhooks count: the same event.
	var compact bytes.Buffer
	if err := json.Compact(&compact, d.body); err != nil {
		t.Fatal(err)
	}
	rerendered := bytes.Replace(compact.Bytes(), []byte(`"pending_webhooks":1`), []byte(`"pending_webhooks":2`), 1)
	if bytes.Equal(rerendered, compact.Bytes()) {
		t.Fatal("sample has no pending_webhooks to change")
	}
	retry := delivery{provider: "stripe", body: rerendered, headers: d.headers}
	hs.clock.Advance(5 * time.Minute)
	if resp := hs.deliver(t, retry); resp.Headers[idemhttp.HeaderReplayed] != "true" {
		t.Errorf("re-rendered retry: status %d %s, want a replay", resp.StatusCode, resp.Body)
	}
	// The event itself changing is still a mismatch.
	changed := delivery{provider: "stripe", headers: d.headers,
		body: bytes.Replace(d.body, []byte(`"amount": 2000`), []byte(`"amount": 2500`), 1)}
	wantStatus(t, hs.deliver(t, changed), 422, "event_id_reused")
	if n := hs.sink.attempts(); n != 1 {
		t.Errorf("sink called %d times, want 1", n)
	}
}

func TestDuplicateWhileFirstIsInProgressGets409(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		snk := &recordingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
		hs := newHarness(t, pc.name, harnessConfig{sink: snk})
		id := pc.eventID("busy")
		d := sampleDelivery(t, pc.name, id)

		firstDone := goInvoke(hs.h, d.signed(t, testSecret(pc.name), fixedNow))
		within(t, snk.entered, "the first delivery to reach the sink")

		dup := hs.do(t, d.signed(t, testSecret(pc.name), fixedNow.Add(time.Second)))
		wantStatus(t, dup, 409, "in_progress")
		var retryAfter int
		if _, err := fmt.Sscan(dup.Headers["retry-after"], &retryAfter); err != nil || retryAfter < 1 || retryAfter > 13 {
			// The claim lives for the invocation's 10s plus the core's 2s margin.
			t.Errorf("retry-after = %q, want whole seconds up to the claim's 12s", dup.Headers["retry-after"])
		}
		close(snk.release)
		wantReceipt(t, within(t, firstDone, "the first delivery"), id)

		if got := hs.deliver(t, d).Headers[idemhttp.HeaderReplayed]; got != "true" {
			t.Errorf("delivery after completion not replayed")
		}
		if n := hs.sink.attempts(); n != 1 {
			t.Errorf("sink called %d times, want 1", n)
		}
		outcomes := map[string]int{}
		for _, l := range hs.logs.requests(t) {
			outcomes[l["outcome"].(string)]++
			if l["outcome"] == "in_progress" && l["redis_round_trips"] != float64(1) {
				t.Errorf("in-progress duplicate cost %v round trips, want 1", l["redis_round_trips"])
			}
		}
		if outcomes["executed"] != 1 || outcomes["in_progress"] != 1 || outcomes["replayed"] != 1 {
			t.Errorf("outcomes %v", outcomes)
		}
	})
}

func TestSinkFailureReleasesClaimSoRetryForwards(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		snk := &recordingSink{err: errSinkDown}
		hs := newHarness(t, pc.name, harnessConfig{sink: snk})
		id := pc.eventID("sinkdown")
		d := sampleDelivery(t, pc.name, id)

		wantStatus(t, hs.deliver(t, d), 500, "processing_failed")
		if keys := hs.keys(t); len(keys) != 0 {
			t.Errorf("keys left after a failure: %v", keys)
		}
		l := hs.logs.requests(t)[0]
		if l["outcome"] != "error" || l["reason"] != "processing_failed" || l["redis_round_trips"] != float64(2) ||
			!strings.Contains(fmt.Sprint(l["error"]), errSinkDown.Error()) {
			t.Errorf("log line %v", l)
		}

		snk.setErr(nil)
		hs.clock.Advance(5 * time.Minute)
		retry := hs.deliver(t, d)
		wantReceipt(t, retry, id)
		if retry.Headers[idemhttp.HeaderReplayed] != "" {
			t.Error("retry after a failure was replayed, not executed")
		}
		if sent := snk.sent(); len(sent) != 1 || senderID(sent[0]) != id {
			t.Errorf("sink has %d events after the retry, want 1", len(sent))
		}
	})
}

func TestSinkPanicReleasesClaim(t *testing.T) {
	snk := &recordingSink{panic: true}
	hs := newHarness(t, "github", harnessConfig{sink: snk})
	d := sampleDelivery(t, "github", "8e1f5a2c-panic")
	wantStatus(t, hs.deliver(t, d), 500, "processing_failed")
	if keys := hs.keys(t); len(keys) != 0 {
		t.Errorf("keys left after a panic: %v", keys)
	}
}

func TestLostClaimStillAnswers200AndLogsError(t *testing.T) {
	snk := &recordingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	hs := newHarness(t, "stripe", harnessConfig{sink: snk})
	d := sampleDelivery(t, "stripe", "evt_1LockLost")

	done := goInvoke(hs.h, d.signed(t, testSecret("stripe"), fixedNow))
	within(t, snk.entered, "the delivery to reach the sink")
	// The claim vanishes while the event is being forwarded, as if it had expired.
	for key := range hs.keys(t) {
		if err := hs.rdb.Del(context.Background(), key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	close(snk.release)

	// The event reached the sink: a failure would only make Stripe send it again.
	wantReceipt(t, within(t, done, "the delivery"), "evt_1LockLost")
	l := hs.logs.requests(t)[0]
	if l["outcome"] != "error" || l["reason"] != "lock_lost" || l["level"] != "ERROR" {
		t.Errorf("log line %v", l)
	}
	if keys := hs.keys(t); len(keys) != 0 {
		t.Errorf("a result was stored without a claim: %v", keys)
	}
}

func TestRedisUnreachableGets503WithoutForwarding(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		vars := map[string]string{
			EnvProvider: pc.name,
			EnvSecret:   testSecret(pc.name),
			"REDIS_URL": "redis://" + testsupport.ClosedAddr(t),
		}
		snk := &recordingSink{}
		logs := &logBuffer{}
		h, err := New(context.Background(), env(vars), WithSink(snk), WithClock(newClock(fixedNow).Now), WithLogOutput(logs))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()

		d := sampleDelivery(t, pc.name, pc.eventID("down"))
		start := time.Now()
		resp, err := invoke(h, d.signed(t, testSecret(pc.name), fixedNow))
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, resp, 503, "store_unavailable")
		if resp.Headers["retry-after"] != "1" {
			t.Errorf("retry-after = %q", resp.Headers["retry-after"])
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("503 took %v", took)
		}
		if n := snk.attempts(); n != 0 {
			t.Errorf("sink called %d times with Redis down", n)
		}
		if l := logs.requests(t)[0]; l["outcome"] != "error" || l["reason"] != "store_unavailable" {
			t.Errorf("log line %v", l)
		}
	})
}
