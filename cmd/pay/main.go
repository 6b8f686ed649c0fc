// Command pay sends one SigV4-signed request to a deployed payments API, whose routes use IAM
// authorization by default (PaymentsAuth=iam): a create, or with -id a read. It signs with the
// credentials the AWS SDK finds the standard way (environment, shared config and SSO profiles,
// instance roles); the caller's IAM identity needs execute-api:Invoke on the API and becomes the
// principal that scopes its idempotency keys and payments.
//
//	go run ./cmd/pay -url "$(aws cloudformation describe-stacks --stack-name idem-dev \
//	    --query "Stacks[0].Outputs[?OutputKey=='PaymentsUrl'].OutputValue" --output text)" \
//	    -key order-1001 -body '{"amount":2500,"currency":"EUR"}'
//	go run ./cmd/pay -url <PaymentsUrl> -id pay_...
//
// It prints the status line, the response headers API Gateway and the function set, and the body;
// it exits 1 on a network error and 2 on a status of 400 or above.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
)

func main() {
	var (
		target = flag.String("url", "", "the stack's PaymentsUrl output (https://<api>.execute-api.<region>.amazonaws.com/payments)")
		key    = flag.String("key", "", "idempotency key of a create (default: a new one each run)")
		body   = flag.String("body", `{"amount":2500,"currency":"EUR"}`, "JSON body of a create")
		id     = flag.String("id", "", "read this payment (GET <url>/<id>) instead of creating one")
		region = flag.String("region", "", "signing region (default: from the URL)")
	)
	flag.Parse()
	if *target == "" {
		fmt.Fprintln(os.Stderr, "pay: -url is required (the stack's PaymentsUrl output)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, err := run(ctx, os.Stdout, *target, *key, *body, *id, *region)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if status >= 400 {
		os.Exit(2)
	}
}

func run(ctx context.Context, w io.Writer, target, key, body, id, region string) (int, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return 0, fmt.Errorf("pay: AWS config: %w", err)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return 0, fmt.Errorf("pay: AWS credentials: %w", err)
	}
	if region == "" && RegionFromHost(hostOf(target)) == "" {
		region = cfg.Region
	}
	c := Call{URL: target, Method: http.MethodPost, IdempotencyKey: key, Body: []byte(body)}
	if id != "" {
		c = Call{URL: strings.TrimSuffix(target, "/") + "/" + id, Method: http.MethodGet}
	} else if c.IdempotencyKey == "" {
		c.IdempotencyKey = fmt.Sprintf("pay-%d", time.Now().UnixNano())
	}
	req, err := NewSignedRequest(ctx, c, creds, region, time.Now())
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("pay: %w", err)
	}
	defer resp.Body.Close()
	fmt.Fprintf(w, "%s %s\n%s\n", resp.Proto, resp.Status, formatHeaders(resp.Header))
	if _, err := io.Copy(w, resp.Body); err != nil {
		return resp.StatusCode, fmt.Errorf("pay: read response: %w", err)
	}
	fmt.Fprintln(w)
	return resp.StatusCode, nil
}

func hostOf(u string) string {
	rest, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://"), "/")
	host, _, _ := strings.Cut(rest, ":")
	return host
}

func formatHeaders(h http.Header) string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "%s: %s\n", strings.ToLower(name), strings.Join(h[name], ", "))
	}
	return b.String()
}
