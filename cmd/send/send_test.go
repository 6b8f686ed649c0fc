package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/devapi"
	"github.com/idemlambda/idem/internal/devapi/devapitest"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/pkg/webhook"
)

// startLocalAPI serves the routes of the project's template in-process, on the embedded Redis.
func startLocalAPI(t *testing.T) string {
	t.Helper()
	return startLocalAPIOf(t, "../../template.yaml")
}

// startLocalAPIOf serves the routes of the template at path in-process, on the embedded Redis.
func startLocalAPIOf(t *testing.T, path string) string {
	t.Helper()
	return startLocalAPIWith(t, path, "")
}

// startLocalAPIWith serves the template at path for the WebhookProviders list chosen, as
// make run -providers does ("" for the template's default).
func startLocalAPIWith(t *testing.T, path, chosen string) string {
	t.Helper()
	_, url := devapitest.Start(t, devapi.Config{Template: path, Providers: chosen, Getenv: func(string) string { return "" }})
	return url
}

func defaults(url string) options {
	return options{provider: "stripe", template: "../../template.yaml", url: url, n: 1, amount: 2500, currency: "EUR",
		timeout: 10 * time.Second, retries: 3, retryWait: 200 * time.Millisecond}
}

func TestEveryProviderExecutesOnceAndReplaysTheDuplicates(t *testing.T) {
	for _, c := range []struct{ template, providers string }{
		{"../../template.yaml", ""}, {"../../template.yaml", samtemplate.AllProviders},
	} {
		template := c.template
		t.Run(template+" "+c.providers, func(t *testing.T) {
			o := defaults(startLocalAPIWith(t, template, c.providers))
			o.provider, o.n, o.template, o.providers = "all", 5, template, c.providers
			want, err := templateProviders(template, c.providers)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			sums, err := run(context.Background(), o, &out)
			if err != nil {
				t.Fatal(err)
			}
			if len(sums) != len(want) {
				t.Fatalf("%d summaries for the %d providers %v of %s:\n%s", len(sums), len(want), want, template, &out)
			}
			for _, s := range sums {
				if s.executed != 1 || s.replayed != 4 || !s.ok() || s.requests != 5+s.conflicts {
					t.Errorf("%s: %+v, want 1 executed and 4 replayed (after retrying each 409)\n%s", s.name, s, &out)
				}
				if !strings.Contains(out.String(), s.String()) {
					t.Errorf("summary of %s not printed", s.name)
				}
			}
			if !strings.Contains(out.String(), "idempotent-replayed: true") {
				t.Errorf("the replayed responses are not marked:\n%s", &out)
			}
		})
	}
}

// TestAllSendsToEveryPresetOfTheTemplate: the template, with every provider it can deploy,
// routes every preset, and -provider all signs for each of them.
func TestAllSendsToEveryPresetOfTheTemplate(t *testing.T) {
	got, err := templateProviders("../../template.yaml", samtemplate.AllProviders)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), webhook.Names()) {
		t.Fatalf("providers %v, want every preset %v", got, webhook.Names())
	}
}

func TestPaymentsModeCreatesOnePayment(t *testing.T) {
	o := defaults(startLocalAPI(t))
	o.payments, o.n = true, 4
	var out bytes.Buffer
	sums, err := run(context.Background(), o, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 1 || sums[0].executed != 1 || sums[0].replayed != 3 || !sums[0].ok() {
		t.Fatalf("%+v\n%s", sums, &out)
	}
	if !strings.Contains(out.String(), " 201 ") || !strings.Contains(out.String(), `"amount":2500`) {
		t.Errorf("the responses are not printed:\n%s", &out)
	}
}

func TestWrongSecretIsReportedAsFailure(t *testing.T) {
	o := defaults(startLocalAPI(t))
	o.provider, o.secret, o.n = "github", "not-the-secret", 2
	var out bytes.Buffer
	sums, err := run(context.Background(), o, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sums[0].ok() || sums[0].other != 2 || !strings.Contains(out.String(), " 401 ") {
		t.Fatalf("%+v\n%s", sums[0], &out)
	}
}

func TestURLIsABaseOrTheFullEndpoint(t *testing.T) {
	for _, tc := range []struct {
		o    func(*options)
		want []string
		err  bool
	}{
		{o: func(o *options) {}, want: []string{"http://h:3000/webhooks/stripe"}},
		{o: func(o *options) { o.url = "http://h:3000/" }, want: []string{"http://h:3000/webhooks/stripe"}},
		{o: func(o *options) { o.url = "https://x.example/webhooks/stripe" }, want: []string{"https://x.example/webhooks/stripe"}},
		{o: func(o *options) { o.payments = true }, want: []string{"http://h:3000/payments"}},
		{o: func(o *options) { o.provider = "all" }, want: []string{
			"http://h:3000/webhooks/github", "http://h:3000/webhooks/shopify", "http://h:3000/webhooks/slack",
			"http://h:3000/webhooks/standard", "http://h:3000/webhooks/stripe"}},
		{o: func(o *options) { o.provider = "all"; o.secret = "s" }, err: true},
		{o: func(o *options) { o.provider = "nope" }, err: true},
		{o: func(o *options) { o.url = "h:3000" }, err: true},
		{o: func(o *options) { o.n = 0 }, err: true},
	} {
		o := defaults("http://h:3000")
		tc.o(&o)
		reqs, err := build(o, time.Now())
		if tc.err {
			if err == nil {
				t.Errorf("%+v: no error", o)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", o, err)
			continue
		}
		var got []string
		for _, r := range reqs {
			got = append(got, r.url)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%+v: urls %q, want %q", o, got, tc.want)
		}
	}
}

func TestNewIDsHaveTheProvidersShape(t *testing.T) {
	for provider, prefix := range map[string]string{"stripe": "evt_", "standard": "msg_", "slack": "Ev", "": "order-"} {
		if id := newID(provider); !strings.HasPrefix(id, prefix) || newID(provider) == id {
			t.Errorf("newID(%q) = %q", provider, id)
		}
	}
	if id := newID("github"); len(id) != 36 || id[14] != '4' {
		t.Errorf("newID(github) = %q, want a version 4 UUID", id)
	}
}

// A delivery is signed again when it is sent: the tolerance of a timestamped signature runs
// from then, not from when the requests of every provider were built.
func TestDeliveriesAreSignedAgainWhenSent(t *testing.T) {
	reqs, err := build(defaults("http://h:3000"), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := reqs[0].sign(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	old, now := reqs[0].headers.Get("stripe-signature"), fresh.headers.Get("stripe-signature")
	if old == "" || now == old || fresh.id != reqs[0].id || fresh.url != reqs[0].url {
		t.Errorf("signed again: %s %s %q; want the same event and URL as %s %s, signed anew (was %q)",
			fresh.id, fresh.url, now, reqs[0].id, reqs[0].url, old)
	}
}

// TestAllSendsOnlyToTheRoutesTheRunningAPIServes: a local API serving the template's default
// providers gets deliveries for those only, whatever -providers says.
func TestAllSendsOnlyToTheRoutesTheRunningAPIServes(t *testing.T) {
	o := defaults(startLocalAPIWith(t, "../../template.yaml", ""))
	o.provider, o.providers = "all", samtemplate.AllProviders
	var out bytes.Buffer
	sums, err := run(context.Background(), o, &out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range sums {
		names = append(names, s.name)
		if s.executed != 1 || !s.ok() {
			t.Errorf("%s: %+v", s.name, s)
		}
	}
	slices.Sort(names)
	if want := []string{"github", "shopify", "slack", "standard", "stripe"}; !slices.Equal(names, want) {
		t.Fatalf("sent to %v, want the %v the API serves\n%s", names, want, &out)
	}
}
