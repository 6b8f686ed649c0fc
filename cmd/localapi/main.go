// Command localapi serves every route of template.yaml on 127.0.0.1:3000 (the port of
// `sam local start-api`), invoking the functions' handlers in-process with the payload v2.0
// events API Gateway would send them, on an embedded Redis unless REDIS_URL is set, with
// development secrets that it prints at start:
//
//	go run ./cmd/localapi                     # make run
//	go run ./cmd/localapi -addr 127.0.0.1:3001
//	REDIS_URL=redis://127.0.0.1:6379 LOG_LEVEL=debug go run ./cmd/localapi
//
// The address comes from -addr, else LOCALAPI_ADDR, else 127.0.0.1:3000. -secret
// provider=secret (repeatable) makes a webhook function accept another secret besides its
// development secret, such as the one `stripe listen --forward-to` signs with:
//
//	go run ./cmd/localapi -secret stripe=whsec_...
//
// The webhook routes are those a deploy with the template's defaults creates: one per provider
// of its WebhookProviders parameter (Stripe, GitHub, Shopify, Standard Webhooks, Slack). -providers
// (else LOCALAPI_PROVIDERS) serves others, as keys of the template's WebhookProvider mapping, or
// every provider the template can deploy:
//
//	go run ./cmd/localapi -providers all      # make run PROVIDERS=all
//	go run ./cmd/localapi -providers Stripe,Twilio,CoinbaseCommerce
//
// With WEBHOOK_HMAC_HEADER and the other WEBHOOK_HMAC_* settings in the environment it also
// serves POST /webhooks/hmac with them:
//
//	WEBHOOK_HMAC_HEADER=x-acme-signature WEBHOOK_HMAC_PREFIX=sha256= go run ./cmd/localapi
//
// Package devapi documents how each function's environment is made; package gateway what is
// answered how.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/idemlambda/idem/internal/devapi"
	"github.com/idemlambda/idem/internal/samtemplate"
)

// DefaultAddr is where the API listens unless -addr or LOCALAPI_ADDR says otherwise.
const DefaultAddr = "127.0.0.1:3000"

// EnvAddr is the environment variable that changes the default of -addr.
const EnvAddr = "LOCALAPI_ADDR"

// EnvProviders is the environment variable that changes the default of -providers.
const EnvProviders = "LOCALAPI_PROVIDERS"

func main() {
	addr := flag.String("addr", envOr(EnvAddr, DefaultAddr), "host:port to listen on (env "+EnvAddr+")")
	template := flag.String("template", devapi.DefaultTemplate, "SAM template whose routes are served")
	providers := flag.String("providers", os.Getenv(EnvProviders), "webhook providers to serve, as the template's "+devapi.ProvidersParameter+
		" parameter takes them (keys of its "+devapi.ProvidersMapping+" mapping, comma-separated), or "+devapi.AllProviders+
		"; empty: the parameter's default (env "+EnvProviders+")")
	secrets := secretFlag{}
	flag.Var(secrets, "secret", "`provider=secret` also accepted by that provider's function, besides its development secret (repeatable), e.g. the whsec_ secret of `stripe listen`")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := devapi.Config{Template: *template, Secrets: secrets}
	if p := strings.TrimSpace(*providers); p != "" {
		cfg.Parameters = map[string]string{devapi.ProvidersParameter: p}
	}
	if err := run(ctx, *addr, cfg, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "localapi:", err)
		os.Exit(1)
	}
}

// secretFlag collects -secret provider=secret flags.
type secretFlag map[string][]string

func (f secretFlag) String() string { return "" }

func (f secretFlag) Set(v string) error {
	provider, secret, ok := strings.Cut(v, "=")
	provider, secret = strings.TrimSpace(provider), strings.TrimSpace(secret)
	if !ok || provider == "" || secret == "" || strings.Contains(secret, ",") {
		return fmt.Errorf("want provider=secret (one secret, no comma), got %q", v)
	}
	f[provider] = append(f[provider], secret)
	return nil
}

func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// run serves until ctx ends, then shuts down gracefully. The banner goes to out; ready, when
// not nil, receives the base URL once the listener is open.
func run(ctx context.Context, addr string, cfg devapi.Config, out io.Writer, ready chan<- string) error {
	api, err := devapi.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer api.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	base := "http://" + ln.Addr().String()
	banner(out, api, base)

	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready <- base
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Invocations in flight finish (each is bounded by its function's timeout).
	shutdown, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// banner prints the routes, the secrets and a few ready-to-paste requests.
func banner(w io.Writer, api *devapi.API, base string) {
	fmt.Fprintf(w, "idem local API: %d routes of %s, in-process, as API Gateway HTTP API payload v2.0\n", len(api.Template.Routes()), api.Template.Path)
	fmt.Fprintf(w, "redis: %s\n", api.RedisDescription())
	fmt.Fprintf(w, "webhook providers: %s (-providers %s serves every provider the template can deploy)\n\n", strings.Join(api.Providers(), ", "), devapi.AllProviders)
	routes := api.Template.Routes()
	slices.SortStableFunc(routes, func(a, b samtemplate.Route) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	for _, r := range routes {
		f, _ := api.Function(r.Function)
		detail := fmt.Sprintf("timeout %s", f.Timeout)
		switch {
		case f.Provider() != "":
			// Only the public development secret is printed, not those given with -secret.
			detail += ", WEBHOOK_SECRET=" + devapi.DevSecret(f.Provider())
			if n := strings.Count(f.LocalEnv["WEBHOOK_SECRET"], ","); n > 0 {
				detail += fmt.Sprintf(" (+%d from -secret)", n)
			}
			detail += ", sink " + f.LocalEnv["WEBHOOK_SINK"]
		case f.LocalEnv["PAYMENTS_LEDGER"] != "":
			detail += ", ledger " + f.LocalEnv["PAYMENTS_LEDGER"]
		}
		fmt.Fprintf(w, "  %-5s %-45s %-24s %s\n", r.Method, base+r.Path, r.Function, detail)
	}
	for _, f := range api.Functions {
		if f.Code == samtemplate.Consumer {
			fmt.Fprintf(w, "  %-5s %-45s %-24s %s\n", "", "(in-process FIFO queue, the sqs sink's)", f.LogicalID,
				"each forwarded event runs once; its line follows the webhook function's")
		}
	}
	fmt.Fprintf(w, `
Try it (in another terminal):
  make send PROVIDER=all URL=%[1]s N=5
  curl -si %[1]s/payments -H 'content-type: application/json' -H 'idempotency-key: order-1' -d '{"amount":2500,"currency":"EUR"}'
  curl -si %[1]s/payments/<id from the response>
Payments callers: the local API stands in for the deployed authorizer (PAYMENTS_AUTH); a request is
from "local-developer", or from the caller named by the header x-idem-local-principal: alice.

`, base)
	fmt.Fprintf(w, "listening on %s (Ctrl-C to stop)\n", base)
}
