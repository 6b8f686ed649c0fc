package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemlambda/idem/internal/preset"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemlambda/idem/internal/samples"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/webhook"
)

// options are the command line.
type options struct {
	provider string
	template string // the template whose webhook routes -provider all sends to
	// providers is the template's WebhookProviders for -provider all, as the local API takes
	// it: empty for the template's default, samtemplate.AllProviders for every provider. A local API
	// that lists the providers it serves (served) overrides it.
	providers string
	// served are the providers the API at url says it serves (samtemplate.RoutesPath), or nil when it
	// says nothing: a deployed API.
	served    []string
	url       string
	n         int
	secret    string
	eventID   string
	payments  bool
	key       string
	amount    int64
	currency  string
	timeout   time.Duration
	retries   int
	retryWait time.Duration
}

// request is what is sent n times: one signed delivery, or one payment request.
type request struct {
	name    string // provider, or "payments"
	id      string // event id or idempotency key
	url     string
	body    []byte
	headers http.Header
	// sign, for a signed delivery, signs it again at now: a provider's tolerance for the signed
	// timestamp runs from the moment it is first sent, not from when every request was built.
	sign func(now time.Time) (request, error)
}

// response is one answer.
type response struct {
	delivery   int           // which of the n deliveries, from 1
	attempt    int           // 0 for the first request, then 1, 2, ... for retries after a 409
	elapsed    time.Duration // from the first request of the run until this answer
	status     int
	replayed   bool
	retryAfter string
	body       string
	err        error
}

// summary counts the answers to one request sent n times.
type summary struct {
	name       string
	id         string
	url        string
	deliveries int
	requests   int
	executed   int // 2xx, not replayed
	replayed   int // 2xx with idempotent-replayed: true
	conflicts  int // 409 answers, retried or not
	inProgress int // deliveries whose last answer was still 409
	other      int // deliveries answered with any other status
	failed     int // deliveries with no answer
}

// ok reports whether every delivery got an answer a duplicate may get.
func (s summary) ok() bool { return s.other == 0 && s.failed == 0 }

func (s summary) String() string {
	line := fmt.Sprintf("%-9s %-38s %d deliveries, %d requests: %d executed, %d replayed, %d answered 409",
		s.name, s.id, s.deliveries, s.requests, s.executed, s.replayed, s.conflicts)
	if s.inProgress > 0 {
		line += fmt.Sprintf(" (%d still 409 after the retries)", s.inProgress)
	} else if s.conflicts > 0 {
		line += " (then retried)"
	}
	return line + fmt.Sprintf(", %d other, %d failed", s.other, s.failed)
}

// run builds the requests the options ask for, signs each delivery again just before it is
// first sent (a timestamped signature's tolerance runs from then), sends each n times
// concurrently, sends a delivery answered 409 again after o.retryWait (up to o.retries times),
// prints every answer and a summary per request to out, and returns the summaries.
func run(ctx context.Context, o options, out io.Writer) ([]summary, error) {
	client := &http.Client{Timeout: o.timeout}
	if o.provider == "all" {
		o.served = servedProviders(ctx, client, o.url)
	}
	reqs, err := build(o, time.Now())
	if err != nil {
		return nil, err
	}
	var sums []summary
	for _, r := range reqs {
		if r.sign != nil {
			if r, err = r.sign(time.Now()); err != nil {
				return sums, err
			}
		}
		fmt.Fprintf(out, "%s: POST %s (%s) x%d\n", r.name, r.url, r.id, o.n)
		s, err := deliver(ctx, client, r, o, out)
		if err != nil {
			return sums, err
		}
		sums = append(sums, s)
	}
	fmt.Fprintln(out)
	for _, s := range sums {
		fmt.Fprintln(out, s)
	}
	return sums, nil
}

// deliver sends r o.n times concurrently, then again, after o.retryWait, each delivery
// answered 409, up to o.retries times; it prints every answer to out and returns their
// summary, or an error when ctx ends while it waits to retry.
func deliver(ctx context.Context, client *http.Client, r request, o options, out io.Writer) (summary, error) {
	s := summary{name: r.name, id: r.id, url: r.url, deliveries: o.n}
	start := time.Now()
	last := make([]response, o.n)
	pending := make([]int, o.n)
	for i := range pending {
		pending[i] = i + 1
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 {
			if attempt > o.retries {
				break
			}
			select {
			case <-ctx.Done():
				return s, fmt.Errorf("interrupted: %w", ctx.Err())
			case <-time.After(o.retryWait):
			}
		}
		resps := sendConcurrently(ctx, client, r, pending, attempt, start)
		s.requests += len(resps)
		pending = pending[:0]
		for _, resp := range resps {
			printResponse(out, resp)
			last[resp.delivery-1] = resp
			if resp.err == nil && resp.status == http.StatusConflict {
				s.conflicts++
				pending = append(pending, resp.delivery)
			}
		}
	}
	for _, resp := range last {
		s.count(resp)
	}
	return s, nil
}

// count adds the last answer to one delivery to s.
func (s *summary) count(last response) {
	switch {
	case last.err != nil:
		s.failed++
	case last.status >= 200 && last.status < 300 && last.replayed:
		s.replayed++
	case last.status >= 200 && last.status < 300:
		s.executed++
	case last.status == http.StatusConflict:
		s.inProgress++
	default:
		s.other++
	}
}

func printResponse(out io.Writer, r response) {
	label := fmt.Sprintf("#%d", r.delivery)
	if r.attempt > 0 {
		label += fmt.Sprintf(" retry %d", r.attempt)
	}
	if r.err != nil {
		fmt.Fprintf(out, "  %7s  %-10s error: %v\n", r.elapsed.Round(100*time.Microsecond), label, r.err)
		return
	}
	note := ""
	switch {
	case r.replayed:
		note = "idempotent-replayed: true"
	case r.retryAfter != "":
		note = "retry-after: " + r.retryAfter
	}
	fmt.Fprintf(out, "  %7s  %-10s %d %-26s %s\n", r.elapsed.Round(100*time.Microsecond), label, r.status, note, r.body)
}

// build returns the requests to send, signed at now.
func build(o options, now time.Time) ([]request, error) {
	if o.n < 1 {
		return nil, errors.New("-n must be at least 1")
	}
	base, err := url.Parse(o.url)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("-url %q is not an http(s) URL", o.url)
	}
	hasPath := strings.Trim(base.Path, "/") != ""
	endpoint := func(path string) string {
		if hasPath {
			return base.String()
		}
		u := *base
		u.Path = path
		return u.String()
	}
	if o.payments {
		r, err := paymentRequest(o, endpoint("/payments"))
		if err != nil {
			return nil, err
		}
		return []request{r}, nil
	}
	providers, err := chosenProviders(o, hasPath)
	if err != nil {
		return nil, err
	}
	var reqs []request
	for _, p := range providers {
		r, err := delivery(o, p, endpoint("/webhooks/"+p), now)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

// paymentRequest is the POST /payments to target of -amount in -currency, under -key or a new
// idempotency key.
func paymentRequest(o options, target string) (request, error) {
	key := o.key
	if key == "" {
		key = newID("")
	}
	body, err := json.Marshal(map[string]any{"amount": o.amount, "currency": o.currency, "description": "sent by cmd/send"})
	if err != nil {
		return request{}, fmt.Errorf("encode payment: %w", err)
	}
	return request{
		name: "payments", id: key, url: target, body: body,
		headers: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}},
	}, nil
}

// chosenProviders are the providers -provider names: one preset, or for all the providers the
// API says it serves, else those of the template. hasPath says whether -url has a path, which
// only a single provider's endpoint may have.
func chosenProviders(o options, hasPath bool) ([]string, error) {
	if o.provider != "all" {
		if !slices.Contains(webhook.Names(), o.provider) {
			return nil, fmt.Errorf("-provider %q is not one of %s or all", o.provider, strings.Join(webhook.Names(), ", "))
		}
		return []string{o.provider}, nil
	}
	if o.secret != "" || o.eventID != "" || hasPath {
		return nil, errors.New("-provider all takes a base -url and each provider's development secret: leave out -secret, -event-id and the URL path")
	}
	if o.served != nil {
		return o.served, nil
	}
	return templateProviders(o.template, o.providers)
}

// delivery is provider p's sample delivery to target, under -event-id or a new event id, signed
// at now with -secret or p's development secret; its sign signs it again.
func delivery(o options, p, target string, now time.Time) (request, error) {
	secret := o.secret
	if secret == "" {
		secret = samples.SigningSecret(p)
	}
	id := o.eventID
	if id == "" {
		id = newID(p)
	}
	sign := func(now time.Time) (request, error) {
		d, err := samples.DeliveryTo(p, secret, id, publicURL(target), now)
		if err != nil {
			return request{}, err
		}
		r := request{name: p, id: id, url: target, body: d.Body, headers: d.Header}
		if u, err := url.Parse(d.URL); err == nil && u.RawQuery != "" {
			// The sender's own query parameters (Twilio's bodySHA256) travel with the request.
			r.url += "?" + u.RawQuery
		}
		return r, nil
	}
	r, err := sign(now)
	if err != nil {
		return request{}, err
	}
	r.sign = sign
	return r, nil
}

// publicURL is the URL a function rebuilds for a request posted to target, which URL-signing
// senders sign: https (API Gateway answers HTTPS only), the host without a port (the event's
// domainName names none, in AWS or in the local API) and the path. Behind a proxy or a custom
// domain, the function's WEBHOOK_PUBLIC_URL must name target.
func publicURL(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	u.Scheme, u.Host = "https", u.Hostname()
	return u.String()
}

// servedProviders asks the API at base which webhook providers it serves (samtemplate.RoutesPath),
// as a local API answers, and returns them without hmac, whose settings the sender does not
// know; nil when the API does not answer that (a deployed API answers 404).
func servedProviders(ctx context.Context, client *http.Client, base string) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+samtemplate.RoutesPath, nil)
	if err != nil {
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var served samtemplate.Served
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&served) != nil || served.Providers == nil {
		return nil
	}
	out := []string{}
	for _, p := range served.Providers {
		if _, ok := preset.Lookup(p); ok {
			out = append(out, p)
		}
	}
	return out
}

// templateProviders lists the presets whose webhook functions the template at path declares
// for the WebhookProviders list chosen (as the local API's -providers takes it), in template
// order: the routes `make run -providers` serves. A function configured with hmac is left out:
// its settings, which the sender does not know, say how it signs.
func templateProviders(path, chosen string) ([]string, error) {
	t, err := samtemplate.LoadProviders(path, chosen)
	if err != nil {
		return nil, fmt.Errorf("-provider all reads the routes of %s for -providers %q: %w", path, chosen, err)
	}
	var out []string
	for _, f := range t.Functions {
		p := f.Env["WEBHOOK_PROVIDER"]
		if f.Code != samtemplate.Webhook || len(f.Routes) == 0 || slices.Contains(out, p) {
			continue
		}
		if slices.Contains(webhook.Names(), p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s declares no webhook function of a preset", path)
	}
	return out, nil
}

func sendConcurrently(ctx context.Context, client *http.Client, r request, deliveries []int, attempt int, start time.Time) []response {
	out := make(chan response, len(deliveries))
	release := make(chan struct{})
	var wg sync.WaitGroup
	for _, d := range deliveries {
		wg.Go(func() {
			<-release
			resp := send(ctx, client, r)
			resp.delivery, resp.attempt, resp.elapsed = d, attempt, time.Since(start)
			out <- resp
		})
	}
	close(release)
	wg.Wait()
	close(out)
	var resps []response
	for resp := range out {
		resps = append(resps, resp)
	}
	slices.SortStableFunc(resps, func(a, b response) int { return cmp.Compare(a.elapsed, b.elapsed) })
	return resps
}

func send(ctx context.Context, client *http.Client, r request) response {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.body))
	if err != nil {
		return response{err: fmt.Errorf("build request: %w", err)}
	}
	for k, v := range r.headers {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{err: fmt.Errorf("post: %w", err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return response{status: resp.StatusCode, err: fmt.Errorf("read response: %w", err)}
	}
	return response{
		status:     resp.StatusCode,
		replayed:   strings.EqualFold(resp.Header.Get(idemhttp.HeaderReplayed), "true"),
		retryAfter: resp.Header.Get("Retry-After"),
		body:       strings.TrimSpace(string(body)),
	}
}
