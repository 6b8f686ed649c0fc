// Command send signs realistic sample webhook deliveries and posts them to a local or deployed
// API, or posts payment requests with an idempotency key, N at once, to show how duplicates
// are answered:
//
//	go run ./cmd/send -provider stripe -url http://127.0.0.1:3000 -n 10   # make send PROVIDER=stripe N=10
//	go run ./cmd/send -provider all -n 5                                   # every provider route of template.yaml
//	go run ./cmd/send -provider github -url https://<api>/webhooks/github -secret "$SECRET"
//	go run ./cmd/send -payments -n 5                                       # POST /payments, one key
//
// Each run draws a new event id (or idempotency key), signs the delivery once, and sends the
// same bytes n times concurrently, as a sender delivering one event several times at once
// would: one of them does the work (executed), the others are answered from the stored result
// (replayed, with idempotent-replayed: true) or, while the first is still running, with 409
// and retry-after. Like a sender, it sends a delivery answered 409 again, after -retry-wait
// (rather than a provider's own schedule of minutes to hours), up to -retries times.
// The secret defaults to the provider's development secret, so it works against `make run`
// as it is. -url is the API's base URL (the path /webhooks/<provider> or /payments is added),
// or with a single provider the full URL of its endpoint.
//
// It prints every response and a summary per target, and exits with status 1 when a request
// failed or was answered with anything but 2xx or 409.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

func main() {
	var o options
	flag.StringVar(&o.provider, "provider", "stripe", "webhook provider (a preset), or all (every preset route of -template): "+fmt.Sprint(webhook.Names()))
	flag.StringVar(&o.template, "template", "template.yaml", "SAM template whose webhook routes -provider all sends to")
	flag.StringVar(&o.providers, "providers", "", "with -provider all, the template's WebhookProviders as the local API's -providers takes them: all, or keys such as Stripe,Twilio (default: the template's default list)")
	flag.StringVar(&o.url, "url", "http://127.0.0.1:3000", "base URL of the API, or the full endpoint URL for one provider")
	flag.IntVar(&o.n, "n", 1, "how many times to send the same delivery, concurrently")
	flag.StringVar(&o.secret, "secret", "", "signing secret (default: the provider's development secret, as `make run` accepts)")
	flag.StringVar(&o.eventID, "event-id", "", "event id to send (default: a new one each run)")
	flag.BoolVar(&o.payments, "payments", false, "POST /payments with one idempotency key instead of webhooks")
	flag.StringVar(&o.key, "key", "", "idempotency key for -payments (default: a new one each run)")
	flag.Int64Var(&o.amount, "amount", 2500, "amount for -payments, in minor units")
	flag.StringVar(&o.currency, "currency", "EUR", "currency for -payments")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of each request")
	flag.IntVar(&o.retries, "retries", 3, "how often a delivery answered 409 is sent again")
	flag.DurationVar(&o.retryWait, "retry-wait", 500*time.Millisecond, "wait before sending a delivery answered 409 again")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sums, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "send:", err)
		os.Exit(2)
	}
	for _, s := range sums {
		if !s.ok() {
			os.Exit(1)
		}
	}
}

// newID returns a random id with the shape the provider uses for its event ids.
func newID(provider string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	h := hex.EncodeToString(b[:])
	switch provider {
	case "stripe":
		return "evt_3Q" + h[:22]
	case "github", "shopify":
		return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
	case "standard":
		return "msg_" + h[:27]
	case "slack":
		return "Ev0" + h[:9]
	case "":
		return "order-" + h[:12]
	default:
		return "evt_" + h[:24]
	}
}
