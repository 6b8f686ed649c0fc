package handler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

func TestResultOutlivesProviderRetryWindow(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		hs := newHarness(t, pc.name, harnessConfig{})
		wantReceipt(t, hs.deliver(t, sampleDelivery(t, pc.name, pc.eventID("ttl"))), pc.eventID("ttl"))

		keys := hs.keys(t)
		if len(keys) != 1 {
			t.Fatalf("%d keys after one delivery, want 1: %v", len(keys), keys)
		}
		def := signer(t, pc.name).ResultTTL()
		for key, ttl := range keys {
			if ttl <= pc.retryWindow {
				t.Errorf("%s expires in %v, within %s's retry window of %v", key, ttl, pc.name, pc.retryWindow)
			}
			if ttl > def || ttl < def-time.Minute {
				t.Errorf("%s expires in %v, want the provider's %v", key, ttl, def)
			}
			if !strings.HasPrefix(key, hs.prefix+":{"+pc.name+":") {
				t.Errorf("key %q is not <prefix>:{<provider>:<hash>}", key)
			}
			if strings.Contains(key, pc.eventID("ttl")) {
				t.Errorf("key %q holds the raw event id", key)
			}
		}
	})
}

func TestResultTTLComesFromIdemResultTTL(t *testing.T) {
	hs := newHarness(t, "slack", harnessConfig{env: map[string]string{"IDEM_RESULT_TTL": "100h"}})
	hs.deliver(t, sampleDelivery(t, "slack", "Ev0TESTttl"))
	for key, ttl := range hs.keys(t) {
		if ttl <= 99*time.Hour || ttl > 100*time.Hour {
			t.Errorf("%s expires in %v, want 100h", key, ttl)
		}
	}
}

func TestRetryJustBeforeResultExpiresIsReplayed(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		m := testsupport.StartMiniredis(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { rdb.Close() })
		hs := newHarness(t, pc.name, harnessConfig{rdb: rdb, prefix: "idem"})
		id := pc.eventID("late")
		d := sampleDelivery(t, pc.name, id)
		ttl := signer(t, pc.name).ResultTTL()

		wantReceipt(t, hs.deliver(t, d), id)
		// The provider's last retry, then one a minute before the result expires.
		for _, at := range []time.Duration{pc.retryWindow, ttl - time.Minute} {
			m.FastForward(at - hs.clock.Now().Sub(fixedNow))
			hs.clock.Advance(at - hs.clock.Now().Sub(fixedNow))
			if resp := hs.deliver(t, d); resp.Headers[idemhttp.HeaderReplayed] != "true" {
				t.Fatalf("retry %v after the first delivery: status %d, not replayed", at, resp.StatusCode)
			}
		}
		if n := hs.sink.attempts(); n != 1 {
			t.Fatalf("sink called %d times before the result expired", n)
		}

		// Past the TTL the result is gone and the event would run again: the TTL is what
		// stands between a late retry and a second execution.
		m.FastForward(2 * time.Minute)
		hs.clock.Advance(2 * time.Minute)
		if resp := hs.deliver(t, d); resp.Headers[idemhttp.HeaderReplayed] != "" {
			t.Fatalf("delivery after the TTL was replayed")
		}
		if n := hs.sink.attempts(); n != 2 {
			t.Errorf("sink called %d times, want 2 after expiry", n)
		}
	})
}

func TestNoKeyIsWrittenWithoutExpiry(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		snk := &recordingSink{}
		hs := newHarness(t, pc.name, harnessConfig{sink: snk})
		checkAll := func(when string) int {
			t.Helper()
			keys := hs.keys(t)
			for key, ttl := range keys {
				if ttl <= 0 {
					t.Errorf("%s: key %s has PTTL %v", when, key, ttl)
				}
			}
			return len(keys)
		}

		done := hs.deliver(t, sampleDelivery(t, pc.name, pc.eventID("done")))
		wantReceipt(t, done, pc.eventID("done"))
		hs.deliver(t, sampleDelivery(t, pc.name, pc.eventID("done")))

		snk.setErr(errSinkDown)
		wantStatus(t, hs.deliver(t, sampleDelivery(t, pc.name, pc.eventID("failed"))), 500, "processing_failed")
		snk.setErr(nil)

		// An in-progress claim expires too.
		snk.mu.Lock()
		snk.entered, snk.release = make(chan struct{}, 1), make(chan struct{})
		snk.mu.Unlock()
		busy := goInvoke(hs.h, sampleDelivery(t, pc.name, pc.eventID("busy")).signed(t, testSecret(pc.name), fixedNow))
		within(t, snk.entered, "the delivery to reach the sink")
		if n := checkAll("claim in progress"); n != 2 {
			t.Errorf("%d keys while one event is in progress, want 2", n)
		}
		close(snk.release)
		wantReceipt(t, within(t, busy, "the delivery"), pc.eventID("busy"))

		if n := checkAll("after all deliveries"); n != 2 {
			t.Errorf("%d keys, want 2 (the failed event leaves none)", n)
		}
	})
}

// connectionsReceived is the server's count of accepted connections since it started.
func connectionsReceived(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no total_connections_received in INFO stats")
	return 0
}

func TestClientsAreBuiltOnceAndConnectionsReused(t *testing.T) {
	srv := testsupport.StartRedis(t)
	admin := srv.NewClient()
	before := connectionsReceived(t, admin)

	snk := &recordingSink{}
	vars := map[string]string{EnvProvider: "stripe", EnvSecret: testSecret("stripe"), "REDIS_URL": srv.URL()}
	h, err := New(context.Background(), env(vars), WithSink(snk), WithClock(newClock(fixedNow).Now), WithLogOutput(&logBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if n := connectionsReceived(t, admin) - before; n != 0 {
		t.Fatalf("New dialed Redis %d times; clients connect lazily", n)
	}

	const events = 20
	invocations := 0
	for i := range events {
		d := sampleDelivery(t, "stripe", fmt.Sprintf("evt_1Reuse%d", i))
		for range 2 { // first delivery and a retry
			resp, _ := invoke(h, d.signed(t, testSecret("stripe"), fixedNow))
			wantStatus(t, resp, 200, "")
			invocations++
		}
	}
	// Overlapping invocations, as with AWS_LAMBDA_MAX_CONCURRENCY, share the pool too.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			d := sampleDelivery(t, "stripe", fmt.Sprintf("evt_1Overlap%d", i))
			resp, _ := invoke(h, d.signed(t, testSecret("stripe"), fixedNow))
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	invocations += 16

	dialed := connectionsReceived(t, admin) - before
	if dialed < 1 || dialed > redisconn.DefaultPoolSize {
		t.Errorf("%d invocations opened %d connections, want at most the pool size %d", invocations, dialed, redisconn.DefaultPoolSize)
	}
	if n := len(snk.sent()); n != events+16 {
		t.Errorf("sink has %d events, want %d", n, events+16)
	}
}

func TestRedisOutageGets503AndRecoveryNeedsNoNewHandler(t *testing.T) {
	srv := testsupport.StartRedis(t)
	snk := &recordingSink{}
	vars := map[string]string{EnvProvider: "shopify", EnvSecret: testSecret("shopify"), "REDIS_URL": srv.URL()}
	h, err := New(context.Background(), env(vars), WithSink(snk), WithLogOutput(&logBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	deliver := func(id string) events.APIGatewayV2HTTPResponse {
		resp, _ := invoke(h, sampleDelivery(t, "shopify", id).signed(t, testSecret("shopify"), time.Now()))
		return resp
	}

	wantReceipt(t, deliver("before-outage"), "before-outage")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	resp := deliver("during-outage")
	wantStatus(t, resp, 503, "store_unavailable")
	if resp.Headers["retry-after"] == "" {
		t.Error("503 without retry-after")
	}
	if n := snk.attempts(); n != 1 {
		t.Errorf("sink called %d times; the event during the outage must not be forwarded", n)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	wantReceipt(t, deliver("during-outage"), "during-outage")
	if n := snk.attempts(); n != 2 {
		t.Errorf("sink called %d times after recovery, want 2", n)
	}
}

func TestRedisFailingBeforeCompletionStillAnswers200(t *testing.T) {
	srv := testsupport.StartRedis(t)
	snk := &recordingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	logs := &logBuffer{}
	vars := map[string]string{EnvProvider: "standard", EnvSecret: testSecret("standard"), "REDIS_URL": srv.URL()}
	h, err := New(context.Background(), env(vars), WithSink(snk), WithClock(newClock(fixedNow).Now), WithLogOutput(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	done := goInvoke(h, sampleDelivery(t, "standard", "msg_2Unstored").signed(t, testSecret("standard"), fixedNow))
	within(t, snk.entered, "the delivery to reach the sink")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	close(snk.release)

	// Forwarded, so 200; but the result is not stored, which the log line says.
	wantReceipt(t, within(t, done, "the delivery"), "msg_2Unstored")
	l := logs.requests(t)[0]
	if l["outcome"] != "error" || l["reason"] != "result_not_stored" {
		t.Errorf("log line %v", l)
	}
}

func TestClientFromRedisURLServesUntilClose(t *testing.T) {
	logs := &logBuffer{}
	vars := map[string]string{EnvProvider: "slack", EnvSecret: testSecret("slack"), "WEBHOOK_SINK": "log",
		"REDIS_URL": "redis://" + testsupport.SharedRedisAddr(), "IDEM_KEY_PREFIX": keyPrefix(t)}
	h, err := New(context.Background(), env(vars), WithClock(newClock(fixedNow).Now), WithLogOutput(logs))
	if err != nil {
		t.Fatal(err)
	}
	d := sampleDelivery(t, "slack", "Ev0TESTclose")
	for range 2 {
		resp, _ := invoke(h, d.signed(t, testSecret("slack"), fixedNow))
		wantReceipt(t, resp, "Ev0TESTclose")
	}
	outcomes := []any{}
	for _, l := range logs.requests(t) {
		outcomes = append(outcomes, l["outcome"])
	}
	if fmt.Sprint(outcomes) != "[executed replayed]" {
		t.Errorf("outcomes %v", outcomes)
	}
	// The log sink wrote the event once, with its body as JSON.
	var forwarded int
	for _, l := range logs.lines(t, "") {
		if l["provider"] == "slack" && l["id"] == "Ev0TESTclose" && l["body"] != nil {
			forwarded++
		}
	}
	if forwarded != 1 {
		t.Errorf("log sink wrote the event %d times, want 1:\n%s", forwarded, logs)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := invoke(h, d.signed(t, testSecret("slack"), fixedNow)); resp.StatusCode != 503 {
		t.Errorf("after Close: status %d, want 503 (the client is closed)", resp.StatusCode)
	}
}
