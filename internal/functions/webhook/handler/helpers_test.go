package handler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// fixedNow is when the recorded deliveries in testdata/deliveries were signed, and where the
// tests' clocks start.
var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// providerCase is what the tests need to know about one provider.
type providerCase struct {
	name string
	// retryWindow is how long after a first delivery the provider may still retry it (or
	// let it be redelivered): the stored result must outlive it.
	retryWindow time.Duration
	// timestamped reports that the provider signs a timestamp, so a stale delivery exists.
	timestamped bool
	// withoutEventID removes the dedupe key from a delivery, or is nil when the key is
	// signed and a delivery without it cannot pass verification.
	withoutEventID func(t *testing.T, body []byte, headers map[string]string) []byte
	// eventID is an id of the provider's format, distinct for each n.
	eventID func(n string) string
	// bodyKeyed reports that the provider signs the body only, so the dedupe key is the
	// body's digest and the provider's id is unsigned metadata (sink.Event.DeliveryID).
	bodyKeyed bool
}

var providerCases = []providerCase{
	{
		name: "stripe", retryWindow: 72 * time.Hour, timestamped: true,
		withoutEventID: func(t *testing.T, body []byte, _ map[string]string) []byte {
			return withoutMember(t, body, "id")
		},
		eventID: func(n string) string { return "evt_1Test" + n },
	},
	{
		name: "github", retryWindow: 72 * time.Hour, bodyKeyed: true,
		withoutEventID: func(_ *testing.T, body []byte, headers map[string]string) []byte {
			delete(headers, "x-github-delivery")
			return body
		},
		eventID: func(n string) string { return "2c1e6f0a-d6b4-11f0-8de9-" + n },
	},
	{
		name: "shopify", retryWindow: 48 * time.Hour, bodyKeyed: true,
		withoutEventID: func(_ *testing.T, body []byte, headers map[string]string) []byte {
			delete(headers, "x-shopify-webhook-id")
			delete(headers, "x-shopify-event-id")
			return body
		},
		eventID: func(n string) string { return "b54557e4-bdd9-4b37-8a5f-" + n },
	},
	{
		name: "standard", retryWindow: 28 * time.Hour, timestamped: true,
		eventID: func(n string) string { return "msg_2Test" + n },
	},
	{
		name: "slack", retryWindow: time.Hour, timestamped: true,
		withoutEventID: func(t *testing.T, body []byte, _ map[string]string) []byte {
			return withoutMember(t, body, "event_id")
		},
		eventID: func(n string) string { return "Ev0TEST" + n },
	},
}

// forEachProvider runs f as a parallel subtest per provider.
func forEachProvider(t *testing.T, f func(t *testing.T, pc providerCase)) {
	t.Helper()
	for _, pc := range providerCases {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			f(t, pc)
		})
	}
}

// secretPair returns, for a sender of provider, the secret it signs with and the one the
// function is configured with, both made from seed: seed itself (as a whsec_ secret for
// Standard Webhooks), or for a public-key sender the private and public halves of a key pair.
func secretPair(provider, seed string) (signing, verifying string) {
	p, _ := preset.Lookup(provider)
	switch {
	case p.SecretFormat == preset.SecretWhsec:
		s := whsec(seed)
		return s, s
	case p.Family == preset.FamilyPublicKey:
		return webhooktest.KeyPair(provider, seed)
	case p.Family == preset.FamilyItemHMAC:
		// Adyen's HMAC keys are hex.
		s := hex.EncodeToString([]byte(seed))
		return s, s
	}
	return seed, seed
}

// testSecret is the secret the tests sign provider's deliveries with (verifierSecret is the
// one the function is configured with).
func testSecret(provider string) string {
	signing, _ := secretPair(provider, "test-"+provider+"-secret")
	return signing
}

// verifierSecret is the secret the tests configure for provider: testSecret, or for a
// public-key sender the public half of its key pair.
func verifierSecret(provider string) string {
	_, verifying := secretPair(provider, "test-"+provider+"-secret")
	return verifying
}

// otherSecret is a well-formed secret the handler does not accept.
func otherSecret(provider string) string {
	if provider == "standard" {
		return whsec("somebody-else")
	}
	if p, _ := preset.Lookup(provider); p.Family == preset.FamilyItemHMAC {
		return hex.EncodeToString([]byte("somebody-else"))
	}
	return "somebody-else"
}

func withoutMember(t *testing.T, body []byte, member string) []byte {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, member)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signer returns the signing side of provider's preset, from webhooktest.
func signer(t testing.TB, provider string) testSigner {
	t.Helper()
	p, ok := preset.Lookup(provider)
	if !ok {
		t.Fatalf("no preset %q", provider)
	}
	return testSigner{t: t, preset: p}
}

// testSigner signs and samples one preset's deliveries.
type testSigner struct {
	t      testing.TB
	preset preset.Preset
}

// DefaultResultTTL is the preset's retention.
func (s testSigner) ResultTTL() time.Duration { return s.preset.ResultTTL }

// Sample is webhooktest's sample delivery of the preset.
func (s testSigner) Sample(id string, now time.Time) ([]byte, map[string]string) {
	s.t.Helper()
	r, err := webhooktest.Sample(s.preset.Name, id, now)
	if err != nil {
		s.t.Fatal(err)
	}
	return r.Body, apigw.EventHeaders(r.Header)
}

// Sign returns the headers signing body with secret at at adds; a Standard Webhooks message id
// is the body's top-level id when it has one (the samples repeat it there).
func (s testSigner) Sign(secret string, body []byte, at time.Time) map[string]string {
	s.t.Helper()
	in := http.Header{}
	if s.preset.IDHeader != "" {
		var top struct{ ID string }
		if json.Unmarshal(body, &top) == nil && top.ID != "" {
			in.Set(s.preset.IDHeader, top.ID)
		}
	}
	req := apiRequest(s.t, s.preset.Name, body, nil)
	url := apigw.PublicURL(req.RequestContext.DomainName, req.RawPath, req.RawQueryString, "")
	out, err := webhooktest.Sign(s.preset.Name, secret, webhook.Request{Header: in, Body: body, URL: url, Now: at})
	if err != nil {
		s.t.Fatal(err)
	}
	return apigw.EventHeaders(out.Header)
}

// delivery is a provider's delivery before signing: the body and the headers other than the
// signature, which each attempt adds anew.
type delivery struct {
	provider string
	body     []byte
	headers  map[string]string
}

// sampleDelivery is the provider's sample delivery of event id, created at fixedNow.
func sampleDelivery(t testing.TB, provider, id string) delivery {
	t.Helper()
	body, headers := signer(t, provider).Sample(id, fixedNow)
	return delivery{provider: provider, body: body, headers: headers}
}

// signed returns the delivery as API Gateway hands it over, signed with secret at at, as one
// attempt of the provider would send it.
func (d delivery) signed(t testing.TB, secret string, at time.Time) events.APIGatewayV2HTTPRequest {
	t.Helper()
	req := apiRequest(t, d.provider, d.body, d.headers)
	// URL-signing senders sign the public URL the function rebuilds from the event.
	in := webhook.Request{
		Header: apigw.HTTPHeader(d.headers),
		Body:   d.body,
		URL:    apigw.PublicURL(req.RequestContext.DomainName, req.RawPath, req.RawQueryString, ""),
		Now:    at,
	}
	out, err := webhooktest.Sign(d.provider, secret, in)
	if err != nil {
		t.Fatal(err)
	}
	signed := apiRequest(t, d.provider, out.Body, apigw.EventHeaders(out.Header))
	if u, err := url.Parse(out.URL); err == nil && u.RawQuery != "" {
		signed.RawQueryString = u.RawQuery
	}
	return signed
}

// apiRequest fills the recorded API Gateway v2.0 event in testdata with a delivery to
// POST /webhooks/<provider>.
func apiRequest(t testing.TB, provider string, body []byte, headers map[string]string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	var req events.APIGatewayV2HTTPRequest
	readJSON(t, filepath.Join("testdata", "apigw_v2_request.json"), &req)
	route := "/webhooks/" + provider
	req.RouteKey = "POST " + route
	req.RawPath = route
	req.RequestContext.RouteKey = req.RouteKey
	req.RequestContext.HTTP.Path = route
	for k, v := range headers {
		req.Headers[strings.ToLower(k)] = v
	}
	if ua, ok := headers["user-agent"]; ok {
		req.RequestContext.HTTP.UserAgent = ua
	}
	req.Headers["content-length"] = strconv.Itoa(len(body))
	req.Body = string(body)
	return req
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// testClock is a clock the test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(at time.Time) *testClock { return &testClock{now: at} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// recordingSink records every event it is sent. It can fail, panic or hold each call until
// released.
type recordingSink struct {
	mu     sync.Mutex
	events []sink.Event
	calls  int
	err    error
	panic  bool
	delay  time.Duration
	// entered receives a value when a call starts, if set; release must then be closed (or
	// sent to) before the call returns.
	entered chan struct{}
	release chan struct{}
}

func (s *recordingSink) Send(ctx context.Context, e sink.Event) error {
	s.mu.Lock()
	s.calls++
	err, doPanic, delay, entered, release := s.err, s.panic, s.delay, s.entered, s.release
	s.mu.Unlock()
	if entered != nil {
		select {
		case entered <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	if doPanic {
		panic("sink exploded")
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Body = bytes.Clone(e.Body)
	s.events = append(s.events, e)
	return nil
}

func (s *recordingSink) sent() []sink.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sink.Event(nil), s.events...)
}

func (s *recordingSink) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *recordingSink) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// logBuffer collects log lines from concurrent requests.
type logBuffer struct{ testsupport.Buffer }

// lines returns every log line, decoded; msg filters them when not empty.
func (b *logBuffer) lines(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		if msg == "" || m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// requests returns the per-request log lines.
func (b *logBuffer) requests(t testing.TB) []map[string]any { return b.lines(t, "request") }

// env returns a getenv reading m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// harness is one execution environment of the function under test: a Handler with its own
// Redis client to the shared test Redis, a recording sink, a clock and a log buffer.
type harness struct {
	h       *Handler
	sink    *recordingSink
	clock   *testClock
	logs    *logBuffer
	counter *testsupport.CommandCounter
	rdb     redis.UniversalClient // the handler's client
	prefix  string
}

type harnessConfig struct {
	env    map[string]string // merged over the defaults
	prefix string            // IDEM_KEY_PREFIX; a fresh one when empty
	sink   *recordingSink
	clock  *testClock
	rdb    redis.UniversalClient // the client to use; a new one to the shared Redis when nil
	opts   []Option
}

func newHarness(t testing.TB, provider string, cfg harnessConfig) *harness {
	t.Helper()
	if cfg.prefix == "" {
		cfg.prefix = keyPrefix(t)
	}
	if cfg.sink == nil {
		cfg.sink = &recordingSink{}
	}
	if cfg.clock == nil {
		cfg.clock = newClock(fixedNow)
	}
	if cfg.rdb == nil {
		testsupport.SharedRedis(t) // skips or fails when the shared Redis is down
		c := redis.NewClient(&redis.Options{Addr: testsupport.SharedRedisAddr()})
		t.Cleanup(func() { c.Close() })
		cfg.rdb = c
	}
	counter := &testsupport.CommandCounter{}
	cfg.rdb.AddHook(counter)
	vars := map[string]string{
		EnvProvider:       provider,
		EnvSecret:         verifierSecret(provider),
		"IDEM_KEY_PREFIX": cfg.prefix,
	}
	maps.Copy(vars, cfg.env)
	logs := &logBuffer{}
	opts := append([]Option{WithRedis(cfg.rdb), WithSink(cfg.sink), WithClock(cfg.clock.Now), WithLogOutput(logs)}, cfg.opts...)
	h, err := New(context.Background(), env(vars), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &harness{h: h, sink: cfg.sink, clock: cfg.clock, logs: logs, counter: counter, rdb: cfg.rdb, prefix: cfg.prefix}
}

// keyPrefix returns an IDEM_KEY_PREFIX whose keys testsupport deletes at cleanup.
func keyPrefix(t testing.TB) string {
	return strings.TrimSuffix(testsupport.UniquePrefix(t), ":")
}

func (hs *harness) do(t testing.TB, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := invoke(hs.h, req)
	if err != nil {
		t.Fatalf("Handle returned an error: %v", err)
	}
	return resp
}

// invocationTimeout is the deadline of each invocation, the template's function Timeout.
const invocationTimeout = 10 * time.Second

// invoke calls h as Lambda does, with the invocation's deadline in the context.
func invoke(h *Handler, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), invocationTimeout)
	defer cancel()
	return h.Handle(ctx, req)
}

// goInvoke runs one invocation in the background; its response arrives on the channel.
func goInvoke(h *Handler, req events.APIGatewayV2HTTPRequest) <-chan events.APIGatewayV2HTTPResponse {
	done := make(chan events.APIGatewayV2HTTPResponse, 1)
	go func() {
		resp, _ := invoke(h, req)
		done <- resp
	}()
	return done
}

// within waits for a value from ch, failing the test after the invocation timeout.
func within[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(invocationTimeout + 5*time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// deliver signs d with the configured secret at the harness's current time and handles it.
func (hs *harness) deliver(t testing.TB, d delivery) events.APIGatewayV2HTTPResponse {
	t.Helper()
	return hs.do(t, d.signed(t, testSecret(d.provider), hs.clock.Now()))
}

// keys returns the keys under the harness's prefix with their remaining TTL.
func (hs *harness) keys(t testing.TB) map[string]time.Duration {
	t.Helper()
	return keysUnder(t, hs.rdb, hs.prefix)
}

func keysUnder(t testing.TB, c redis.UniversalClient, prefix string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	out := map[string]time.Duration{}
	iter := c.Scan(ctx, 0, prefix+":*", 100).Iterator()
	for iter.Next(ctx) {
		ttl, err := c.PTTL(ctx, iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[iter.Val()] = ttl
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// errorBody decodes an error response.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func errorCode(t testing.TB, resp events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var b errorBody
	if err := json.Unmarshal([]byte(resp.Body), &b); err != nil {
		t.Fatalf("error body %q is not JSON: %v", resp.Body, err)
	}
	if b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("error body %q lacks code or message", resp.Body)
	}
	return b.Error.Code
}

// wantStatus checks status and, for an error, its code; and that every response is JSON.
func wantStatus(t testing.TB, resp events.APIGatewayV2HTTPResponse, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, status, resp.Body)
	}
	if status == 200 && resp.Body == "[accepted]" && resp.Headers["content-type"] == "text/plain" {
		return // Adyen's acknowledgement, the one 200 body that is not JSON
	}
	if ct := resp.Headers["content-type"]; ct != "application/json" {
		t.Errorf("content-type %q, want application/json", ct)
	}
	if !json.Valid([]byte(resp.Body)) {
		t.Errorf("body is not JSON: %q", resp.Body)
	}
	if code != "" {
		if got := errorCode(t, resp); got != code {
			t.Errorf("error code %q, want %q; body %s", got, code, resp.Body)
		}
	}
}

// wantReceipt checks a 200 answer to a delivery of event id: the receipt's id is the event
// id, or, for a provider that signs the body only, the body's digest beside delivery_id id.
func wantReceipt(t testing.TB, resp events.APIGatewayV2HTTPResponse, id string) {
	t.Helper()
	wantStatus(t, resp, 200, "")
	var r struct {
		Received   *bool   `json:"received"`
		ID         *string `json:"id"`
		DeliveryID string  `json:"delivery_id"`
		Type       *string `json:"type"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
		t.Fatal(err)
	}
	if r.Received == nil || !*r.Received || r.ID == nil || r.Type == nil {
		t.Fatalf("body %s, want {\"received\":true,\"id\":...,\"type\":...}", resp.Body)
	}
	switch {
	case r.DeliveryID != "":
		if r.DeliveryID != id || !strings.HasPrefix(*r.ID, "sha256:") {
			t.Errorf("body %s, want delivery_id %q beside a body digest id", resp.Body, id)
		}
	case *r.ID != id:
		t.Errorf("body %s, want id %q", resp.Body, id)
	}
}

// senderID is the id the provider gave an event: its delivery id when the signature does not
// cover it, else the event id.
func senderID(e sink.Event) string {
	if e.DeliveryID != "" {
		return e.DeliveryID
	}
	return e.ID
}

var errSinkDown = errors.New("sink is down")

// whsec writes key as a Standard Webhooks secret.
func whsec(key string) string {
	return preset.WhsecPrefix + base64.StdEncoding.EncodeToString([]byte(key))
}

// bodyDigest is the key of a delivery whose signature covers its body only: "sha256:" and the
// body's hex SHA-256.
func bodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}
