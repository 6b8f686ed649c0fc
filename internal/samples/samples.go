// Package samples builds the sample events of events/: one API Gateway HTTP API payload v2.0
// event per function and route of template.yaml, plus a few that must be refused, with the
// webhook deliveries signed with the development secrets. It also builds events/env.json, the
// per-function variables for `sam local invoke --env-vars` and `sam local start-api --env-vars`.
//
// The events are made by the same code that turns HTTP requests into events in the local API
// server (package gateway), from requests shaped like the senders' own, and the routes and
// function names come from the template, so the files cannot drift from either.
//
// Every webhook function of the template gets a delivery signed the way its preset's sender
// signs (package webhooktest). Senders that sign a timestamp (Stripe, Standard Webhooks, Slack,
// Paddle, Zoom, ...) are accepted within their tolerance, so their files go stale after a few
// minutes and Resign refreshes an event read back from a file; GitHub, Shopify and the other
// body-only signers sign no timestamp.
package samples

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/gateway"
	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// APIID is the apiId of the sample events, and the first label of their domain name.
const APIID = "a1b2c3d4e5"

// Domain is the host the sample events were sent to: an execute-api domain of APIID.
const Domain = APIID + ".execute-api.us-east-1.amazonaws.com"

// DockerHostRedisURL is the REDIS_URL env.json gives every function: a Redis on the
// developer's machine, as seen from the containers sam local runs.
const DockerHostRedisURL = "redis://host.docker.internal:6379"

// WrongSecret is the secret the bad-signature samples are signed with: not the development
// secret of any provider, so every function refuses them with 401.
const WrongSecret = "not-the-signing-secret"

// PaymentKey is the idempotency key of the payments-create samples.
const PaymentKey = "order-1001"

// DevSecret returns the development signing secret of provider: the secret a webhook function
// accepts outside Lambda when no secret is configured, which env.json also sets for sam local.
// It is public, and never accepted by a deployed function.
func DevSecret(provider string) string { return webhook.DevSecret(provider) }

// SigningSecret returns what a sender signs with for a function running with DevSecret: the
// same secret, or for a public-key sender (Discord, SendGrid) the private key whose public half
// DevSecret is.
func SigningSecret(provider string) string { return webhooktest.DevSigningSecret(provider) }

// ErrTimestampInBody is returned by Resign for a sender that stamps the signed time inside the
// signed body (Linear's webhookTimestamp): re-signing cannot refresh it; write the file again
// (make events).
var ErrTimestampInBody = errors.New("the signed timestamp is inside the body: write the event again")

// Sample is one file of events/.
type Sample struct {
	// File is the file's name in events/, e.g. "webhook-stripe.json".
	File string
	// Description says what the event is and what the function answers.
	Description string
	// Route is the template route the event is for; Route.Function is the logical ID of the
	// function to invoke with it.
	Route samtemplate.Route
	// Provider is the webhook provider, "" for the payments samples.
	Provider string
	// Secret is what a webhook sample is signed with: SigningSecret(Provider), or WrongSecret.
	Secret string
	// Status is what the function answers the first time it is invoked with the event in a
	// fresh environment (after the sample named by After, if any).
	Status int
	// Replays is true when a second invocation is answered from the stored result, with
	// idempotent-replayed: true.
	Replays bool
	// After names the sample that must be invoked first, in the same environment and on the
	// same Redis, for Status to hold.
	After string
	// Timestamped is true when the signature covers a timestamp checked against a tolerance
	// (Stripe, Standard Webhooks, Slack, ...): the event is refused that long after it was
	// signed, unless Resign refreshes it.
	Timestamped bool

	request func(now time.Time) (*http.Request, error)
}

// webhookSample describes one webhook sample before the template is known.
type webhookSample struct {
	file, description, provider, eventID string
	wrongSecret, base64Body, replays     bool
	status                               int
	body                                 []byte // replaces the provider's Sample body
}

// Event IDs of the webhook samples: fixed, so that invoking a file twice on one Redis shows
// the second delivery answered from the stored result.
var webhookSamples = []webhookSample{
	{file: "webhook-stripe.json", provider: "stripe", eventID: "evt_3QsampleStripeEvt0001", status: 200, replays: true,
		description: "Stripe payment_intent.succeeded, signed with the development secret: 200, then replayed"},
	{file: "webhook-stripe-bad-signature.json", provider: "stripe", eventID: "evt_3QsampleStripeEvt0002", status: 401, wrongSecret: true,
		description: "Stripe delivery signed with the wrong secret: 401 invalid_signature"},
	{file: "webhook-github.json", provider: "github", eventID: "6f1e3c7a-9b2d-11ef-8a1c-5d7e9f0b2a41", status: 200, replays: true,
		description: "GitHub push, signed with the development secret: 200, then replayed"},
	{file: "webhook-shopify.json", provider: "shopify", eventID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", status: 200, replays: true,
		description: "Shopify orders/create, signed with the development secret: 200, then replayed"},
	{file: "webhook-shopify-base64.json", provider: "shopify", eventID: "0c7b5e2a-61f4-4d8e-9a3b-2f6d8c1e4a97", status: 200, replays: true, base64Body: true,
		description: "Shopify orders/create whose body API Gateway base64-encoded (isBase64Encoded: true): decoded before the signature check, 200"},
	{file: "webhook-standard.json", provider: "standard", eventID: "msg_2pSampleStandardMsg0001", status: 200, replays: true,
		description: "Standard Webhooks invoice.paid (as Svix sends it), signed with the development secret: 200, then replayed"},
	{file: "webhook-slack.json", provider: "slack", eventID: "Ev08SAMPLE0001", status: 200, replays: true,
		description: "Slack event_callback with a message event, signed with the development secret: 200, then replayed"},
	{file: "webhook-slack-url-verification.json", provider: "slack", status: 200,
		body:        []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`),
		description: "Slack url_verification handshake: 200 with the challenge, nothing stored"},
}

// Load loads the SAM template at path and returns it with every sample for its routes (All).
func Load(path string) (*samtemplate.Template, []Sample, error) {
	t, err := samtemplate.Load(path)
	if err != nil {
		return nil, nil, err
	}
	all, err := All(t)
	if err != nil {
		return nil, nil, err
	}
	return t, all, nil
}

// All returns every sample, for the routes of t, sorted by file name. It fails when t lacks a
// route or function a sample needs.
func All(t *samtemplate.Template) ([]Sample, error) {
	var out []Sample
	for _, ws := range append(slices.Clone(webhookSamples), presetSamples(t)...) {
		route, err := webhookRoute(t, ws.provider)
		if err != nil {
			return nil, err
		}
		s := Sample{
			File:        ws.file,
			Description: ws.description,
			Route:       route,
			Provider:    ws.provider,
			Secret:      SigningSecret(ws.provider),
			Status:      ws.status,
			Replays:     ws.replays,
			Timestamped: timestamped(ws.provider),
		}
		if ws.wrongSecret {
			s.Secret = WrongSecret
		}
		secret := s.Secret
		s.request = func(now time.Time) (*http.Request, error) { return webhookRequest(route, ws, secret, now) }
		out = append(out, s)
	}

	create, err := findRoute(t, http.MethodPost, "/payments")
	if err != nil {
		return nil, err
	}
	get, err := findRoute(t, http.MethodGet, "/payments/{id}")
	if err != nil {
		return nil, err
	}
	payment := func(body string, key string) func(time.Time) (*http.Request, error) {
		return func(time.Time) (*http.Request, error) {
			r := newRequest(http.MethodPost, "/payments", []byte(body), "198.51.100.23")
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("User-Agent", "checkout-service/2.3 (+https://shop.example.com)")
			r.Header.Set("Idempotency-Key", key)
			return r, nil
		}
	}
	out = append(out,
		Sample{File: "payments-create.json", Route: create, Status: 201, Replays: true,
			Description: "POST /payments with idempotency-key " + PaymentKey + ": 201 with the payment, then replayed",
			request:     payment(`{"amount":2500,"currency":"EUR","description":"Order #1001","metadata":{"order_id":"1001"}}`, PaymentKey)},
		Sample{File: "payments-create-key-reused.json", Route: create, Status: 422, After: "payments-create.json",
			Description: "the same idempotency-key with a different amount, after payments-create.json: 422 idempotency_key_reused",
			request:     payment(`{"amount":9900,"currency":"EUR","description":"Order #1001","metadata":{"order_id":"1001"}}`, PaymentKey)},
		Sample{File: "payments-create-invalid.json", Route: create, Status: 400,
			Description: "POST /payments without a currency: 400 invalid_request naming the field",
			request:     payment(`{"amount":2500}`, "order-1002")},
		Sample{File: "payments-get.json", Route: get, Status: 404,
			Description: "GET /payments/{id} of a payment that a fresh environment does not hold: 404 (invoke it with the id payments-create.json returned for 200)",
			request: func(time.Time) (*http.Request, error) {
				r := newRequest(http.MethodGet, "/payments/pay_sample00000000000000000000", nil, "198.51.100.23")
				r.Header.Set("User-Agent", "checkout-service/2.3 (+https://shop.example.com)")
				r.Header.Set("Accept", "application/json")
				return r, nil
			}},
	)
	slices.SortFunc(out, func(a, b Sample) int { return strings.Compare(a.File, b.File) })
	return out, nil
}

// Event builds the sample's event as received at now, truncated to the millisecond (the
// precision of requestContext.timeEpoch, so that a file can be rebuilt from its own time).
func (s Sample) Event(now time.Time) (events.APIGatewayV2HTTPRequest, error) {
	now = now.Truncate(time.Millisecond)
	r, err := s.request(now)
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	body, err := readBody(r)
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, err
	}
	params, ok := gateway.PathParameters(s.Route, r.URL.EscapedPath())
	if !ok {
		return events.APIGatewayV2HTTPRequest{}, fmt.Errorf("samples: %s: path %s does not match route %s", s.File, r.URL.Path, s.Route.Key())
	}
	// Everything the gateway would draw at random is derived from the file name, so the same
	// time always gives the same file.
	ev := gateway.NewEvent(r, body, events.APIGatewayV2HTTPRequest{RouteKey: s.Route.Key(), PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: gateway.RequestID(sha256.Sum256([]byte(s.File))), TimeEpoch: now.UnixMilli()}})
	// What a deployed gateway adds besides, which the functions do not read, so that the files
	// are what they would receive.
	rc := &ev.RequestContext
	rc.AccountID, rc.APIID, rc.DomainPrefix = "123456789012", APIID, APIID
	ev.Headers["x-forwarded-for"], ev.Headers["x-forwarded-port"], ev.Headers["x-forwarded-proto"] = rc.HTTP.SourceIP, "443", "https"
	ev.Headers["x-amzn-trace-id"] = fmt.Sprintf("Root=1-%08x-%s", now.Unix(), derived(s.File, 24))
	return ev, nil
}

// Resign signs the body of ev again at now with the sample's secret and sets the signature
// headers and the request time, so that an event read back from its file is within the
// providers' 5-minute tolerance again. It does nothing to a payments sample.
func (s Sample) Resign(ev *events.APIGatewayV2HTTPRequest, now time.Time) error {
	ev.RequestContext.Time = now.UTC().Format("02/Jan/2006:15:04:05 -0700")
	ev.RequestContext.TimeEpoch = now.UnixMilli()
	if s.Provider == "" {
		return nil
	}
	if p, _ := preset.Lookup(s.Provider); p.TimestampField != "" && p.Family != preset.FamilyBodySignature {
		return fmt.Errorf("samples: %s: %w", s.File, ErrTimestampInBody)
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return fmt.Errorf("samples: %s: body is not base64: %w", s.File, err)
		}
	}
	in := webhook.Request{
		Header: apigw.HTTPHeader(ev.Headers),
		Body:   body,
		URL:    apigw.PublicURL(ev.RequestContext.DomainName, ev.RawPath, ev.RawQueryString, ""),
		Now:    now,
	}
	signed, err := sign(s.Provider, s.Secret, in)
	if err != nil {
		return fmt.Errorf("samples: %s: %w", s.File, err)
	}
	for k, v := range apigw.EventHeaders(signed.Header) {
		ev.Headers[k] = v
	}
	if !bytes.Equal(signed.Body, body) {
		// A sender that signs inside its body (Mailgun) re-encodes it.
		ev.Body, ev.IsBase64Encoded = string(signed.Body), false
		ev.Headers["content-length"] = fmt.Sprint(len(signed.Body))
	}
	return nil
}

// Marshal encodes an event as the files hold it: indented JSON, keys sorted, no HTML escaping,
// and without the empty mutual-TLS authentication block that events.APIGatewayV2HTTPRequest
// cannot leave out by itself.
func Marshal(ev events.APIGatewayV2HTTPRequest) ([]byte, error) {
	raw, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("samples: encode event: %w", err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("samples: decode event: %w", err)
	}
	if rc, ok := m["requestContext"].(map[string]any); ok && ev.RequestContext.Authentication.ClientCert.ClientCertPem == "" {
		delete(rc, "authentication")
	}
	return encodeJSON(m)
}

func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("samples: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// Read reads an event file.
func Read(path string) (events.APIGatewayV2HTTPRequest, error) {
	var ev events.APIGatewayV2HTTPRequest
	data, err := os.ReadFile(path)
	if err != nil {
		return ev, fmt.Errorf("samples: %w", err)
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return ev, fmt.Errorf("samples: %s: %w", path, err)
	}
	return ev, nil
}

// EnvFile is the name of the --env-vars file in events/.
const EnvFile = "env.json"

// WriteAll writes every sample of t, signed at now, and EnvFile into dir, and returns the
// names of the files written.
func WriteAll(t *samtemplate.Template, dir string, now time.Time) ([]string, error) {
	all, err := All(t)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("samples: %w", err)
	}
	var written []string
	for _, s := range all {
		ev, err := s.Event(now)
		if err != nil {
			return written, err
		}
		data, err := Marshal(ev)
		if err != nil {
			return written, err
		}
		if err := os.WriteFile(filepath.Join(dir, s.File), data, 0o644); err != nil {
			return written, fmt.Errorf("samples: %w", err)
		}
		written = append(written, s.File)
	}
	env, err := EnvJSON(t, DockerHostRedisURL)
	if err != nil {
		return written, err
	}
	if err := os.WriteFile(filepath.Join(dir, EnvFile), env, 0o644); err != nil {
		return written, fmt.Errorf("samples: %w", err)
	}
	return append(written, EnvFile), nil
}

// LambdaEnv returns the variables that run f inside a Lambda runtime (sam local, the Runtime
// Interface Emulator) against the Redis at redisURL, without AWS: the development secret, the
// log sink, the in-memory ledger and no payments authorization, set explicitly since inside
// Lambda none is a default.
// The variables that name AWS resources are set empty, so that none of them reaches the
// function as an unresolved placeholder.
func LambdaEnv(f samtemplate.Function, redisURL string) map[string]string {
	env := map[string]string{
		"REDIS_URL":     redisURL,
		"REDIS_CLUSTER": "false",
		// The created cache's IAM auth, which a local Redis does not take.
		"REDIS_IAM_AUTH":         "",
		"REDIS_CACHE_NAME":       "",
		"REDIS_CACHE_SERVERLESS": "",
	}
	switch f.Code {
	case samtemplate.Consumer:
		env["WEBHOOK_PAYLOAD_BUCKET"] = ""
	case samtemplate.Webhook:
		provider := f.Env["WEBHOOK_PROVIDER"]
		env["WEBHOOK_PROVIDER"] = provider
		env["WEBHOOK_SECRET"] = DevSecret(provider)
		env["WEBHOOK_SECRET_ARN"] = ""
		env["WEBHOOK_SINK"] = "log"
		env["WEBHOOK_QUEUE_URL"] = ""
		env["WEBHOOK_EVENT_BUS"] = ""
		env["WEBHOOK_PAYLOAD_BUCKET"] = ""
	case samtemplate.Payments:
		env["PAYMENTS_LEDGER"] = "memory"
		env["PAYMENTS_TABLE"] = ""
		// sam local start-api runs no IAM authorizer, so the sample events carry no identity:
		// locally, every caller is the one shared principal (an explicit opt-in, never the
		// template's default).
		env["PAYMENTS_AUTH"] = "none"
	}
	return env
}

// EnvJSON returns the --env-vars file for t: LambdaEnv of every function, keyed by logical ID.
func EnvJSON(t *samtemplate.Template, redisURL string) ([]byte, error) {
	all := map[string]map[string]string{}
	for _, f := range t.Functions {
		all[f.LogicalID] = LambdaEnv(f, redisURL)
	}
	return encodeJSON(all)
}

// Delivery returns a signed delivery of a sample event of provider posted to
// https://Domain/webhooks/<provider>: see DeliveryTo.
func Delivery(provider, secret, eventID string, now time.Time) ([]byte, map[string]string, error) {
	r, err := DeliveryTo(provider, secret, eventID, "https://"+Domain+"/webhooks/"+provider, now)
	return r.Body, apigw.EventHeaders(r.Header), err
}

// DeliveryTo returns a signed delivery of a sample event of provider: the preset's sample body
// for eventID, and the headers the sender sets, the signature made with secret at now included
// (SigningSecret(provider) for a function running with the development secret). publicURL is
// the URL the delivery is posted to, which URL-signing senders (Twilio, Square, HubSpot) sign;
// the returned URL adds the query parameters a sender appends (Twilio's bodySHA256).
func DeliveryTo(provider, secret, eventID, publicURL string, now time.Time) (webhook.Request, error) {
	r, err := webhooktest.Sample(provider, eventID, now)
	if err != nil {
		return webhook.Request{}, fmt.Errorf("samples: %w", err)
	}
	r.URL = publicURL
	return sign(provider, secret, r)
}

// sign signs r as provider's sender does with secret at r.Now.
func sign(provider, secret string, r webhook.Request) (webhook.Request, error) {
	if _, ok := preset.Lookup(provider); !ok {
		return webhook.Request{}, fmt.Errorf("samples: no preset %q (known: %s)", provider, strings.Join(webhook.Names(), ", "))
	}
	signed, err := webhooktest.Sign(provider, secret, r)
	if err != nil {
		return webhook.Request{}, fmt.Errorf("samples: %s cannot sign with the given secret: %w", provider, err)
	}
	return signed, nil
}

// timestamped reports whether provider's signature covers a timestamp checked against a
// tolerance.
func timestamped(provider string) bool {
	p, _ := preset.Lookup(provider)
	signsTime := p.TimestampHeader != "" || p.TimestampField != "" || strings.Contains(p.HeaderFormat, "{timestamp}")
	return signsTime && p.Tolerance > 0
}

// presetSamples are the samples of the template's webhook functions that webhookSamples does
// not describe: one delivery each, signed with the development secret, executed then replayed.
func presetSamples(t *samtemplate.Template) []webhookSample {
	described := map[string]bool{}
	for _, ws := range webhookSamples {
		described[ws.provider] = true
	}
	var out []webhookSample
	for _, f := range t.Functions {
		provider := f.Env["WEBHOOK_PROVIDER"]
		if f.Code != samtemplate.Webhook || described[provider] || len(f.Routes) == 0 {
			continue
		}
		if _, ok := preset.Lookup(provider); !ok {
			continue // hmac: its settings, not a preset, say how it signs
		}
		described[provider] = true
		out = append(out, webhookSample{
			file: "webhook-" + provider + ".json", provider: provider, eventID: "evt_sample_" + provider + "_0001",
			status: 200, replays: true,
			description: provider + " sample delivery, signed with the development secret: 200, then replayed",
		})
	}
	return out
}

func webhookRequest(route samtemplate.Route, ws webhookSample, secret string, now time.Time) (*http.Request, error) {
	r, err := webhooktest.Sample(ws.provider, ws.eventID, now)
	if err != nil {
		return nil, fmt.Errorf("samples: %w", err)
	}
	if ws.body != nil {
		r.Body = ws.body
	}
	r.URL = "https://" + Domain + route.Path
	signed, err := sign(ws.provider, secret, r)
	if err != nil {
		return nil, err
	}
	target := route.Path
	if u, err := url.Parse(signed.URL); err == nil && u.RawQuery != "" {
		target += "?" + u.RawQuery
	}
	req := newRequest(route.Method, target, signed.Body, cmp.Or(senderIPs[ws.provider], "192.0.2.99"))
	for k, v := range signed.Header {
		req.Header[k] = v
	}
	if ws.base64Body {
		// A content-type the gateway does not treat as text makes it base64-encode the body.
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	return req, nil
}

// senderIPs are documentation addresses (RFC 5737) standing in for each sender's network.
var senderIPs = map[string]string{
	"stripe":   "192.0.2.10",
	"github":   "192.0.2.20",
	"shopify":  "192.0.2.30",
	"standard": "192.0.2.40",
	"slack":    "192.0.2.50",
}

func newRequest(method, path string, body []byte, sourceIP string) *http.Request {
	r := httptest.NewRequest(method, "https://"+Domain+path, bytes.NewReader(body))
	r.RemoteAddr = sourceIP + ":40000"
	r.TLS = &tls.ConnectionState{}
	if len(body) == 0 {
		r.ContentLength = 0
	}
	return r
}

func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return nil, fmt.Errorf("samples: read body: %w", err)
	}
	return buf.Bytes(), nil
}

func webhookRoute(t *samtemplate.Template, provider string) (samtemplate.Route, error) {
	if f, ok := t.WebhookFunction(provider); ok && len(f.Routes) > 0 {
		return f.Routes[0], nil
	}
	return samtemplate.Route{}, fmt.Errorf("samples: %s declares no webhook function with a route for WEBHOOK_PROVIDER=%s", t.Path, provider)
}

func findRoute(t *samtemplate.Template, method, path string) (samtemplate.Route, error) {
	for _, r := range t.Routes() {
		if r.Method == method && r.Path == path {
			return r, nil
		}
	}
	return samtemplate.Route{}, fmt.Errorf("samples: %s declares no route %s %s", t.Path, method, path)
}

// derived returns n hex characters derived from seed.
func derived(seed string, n int) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])[:n]
}
