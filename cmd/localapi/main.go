// Command localapi serves every route of template.yaml on 127.0.0.1:3000 (the port of
// `sam local start-api`), invoking the functions' handlers in-process with the payload v2.0
// events API Gateway would send them, on an embedded Redis unless REDIS_URL is set, with
// development secrets that it prints at start (package devapi says what else a local run
// changes):
//
//	go run ./cmd/localapi                          # make run PROVIDERS=
//	go run ./cmd/localapi -providers all           # make run: every provider the template can deploy
//	go run ./cmd/localapi -providers Stripe,Twilio -addr 127.0.0.1:3001
//
// The address comes from -addr, else LOCALAPI_ADDR, else 127.0.0.1:3000. With
// WEBHOOK_HMAC_HEADER and the other WEBHOOK_HMAC_* settings in the environment it also serves
// POST /webhooks/hmac with them.
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
	"strings"
	"syscall"
	"time"

	"github.com/idemlambda/idem/internal/devapi"
	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/pkg/webhook"
)

func main() {
	addr := flag.String("addr", cmp.Or(strings.TrimSpace(os.Getenv("LOCALAPI_ADDR")), "127.0.0.1:3000"), "host:port to listen on (env LOCALAPI_ADDR)")
	var cfg devapi.Config
	flag.StringVar(&cfg.Providers, "providers", "", "webhook providers to serve, as keys of the template's "+samtemplate.ProvidersMapping+
		" mapping (comma-separated), or "+samtemplate.AllProviders+"; empty: the default of its "+samtemplate.ProvidersParameter+" parameter")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, cfg, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "localapi:", err)
		os.Exit(1)
	}
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

// banner prints the routes, the development secrets and a few ready-to-paste requests.
func banner(w io.Writer, api *devapi.API, base string) {
	redis := "Redis at " + api.Redis.Addr() + " (REDIS_URL)"
	if api.Embedded {
		redis = "embedded Redis (miniredis) on " + api.Redis.Addr() + ", in this process; set REDIS_URL to use a real one"
	}
	fmt.Fprintf(w, "idem local API: the routes of %s, in-process, as API Gateway HTTP API payload v2.0\nredis: %s\n\n", api.Template.Path, redis)
	for _, r := range api.Template.Routes() {
		f, _ := api.Template.Function(r.Function)
		detail := "timeout " + f.Timeout.String()
		if f.Code == samtemplate.Webhook {
			detail += ", WEBHOOK_SECRET=" + webhook.DevSecret(f.Env["WEBHOOK_PROVIDER"]) + ", sink " + api.LocalEnv(f.LogicalID)["WEBHOOK_SINK"]
		}
		fmt.Fprintf(w, "  %-5s %-45s %-24s %s\n", r.Method, base+r.Path, r.Function, detail)
	}
	for _, f := range api.Template.Functions {
		if f.Code == samtemplate.Consumer {
			fmt.Fprintf(w, "  %-51s %-24s %s\n", "(in-process FIFO queue, the sqs sink's)", f.LogicalID, "each forwarded event runs once; its line follows the webhook function's")
		}
	}
	fmt.Fprintf(w, `
Try it (in another terminal):
  make send PROVIDER=all URL=%[1]s N=5
  curl -si %[1]s/payments -H 'content-type: application/json' -H 'idempotency-key: order-1' -d '{"amount":2500,"currency":"EUR"}'
Payments callers: the local API stands in for the authorizer; a request is from %[2]q, or from the caller in %[3]s: alice.

listening on %[1]s (Ctrl-C to stop)
`, base, devapi.DefaultPrincipal, devapi.HeaderPrincipal)
}
