package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Service is the SigV4 signing name of API Gateway's invoke endpoints.
const Service = "execute-api"

// Call is one request to the payments API.
type Call struct {
	// URL is the PaymentsUrl output (…/payments) for a create, or …/payments/<id> for a read.
	URL string
	// Method is POST (create) or GET (read).
	Method string
	// IdempotencyKey is sent as the idempotency-key header when not empty.
	IdempotencyKey string
	// Body is the JSON body of a create; nil for a read.
	Body []byte
}

// errNoRegion is returned when neither the URL nor the configuration names a region.
var errNoRegion = errors.New("pay: no region: give -region or use an execute-api URL")

// NewSignedRequest builds the HTTP request for c and signs it with SigV4 for execute-api in
// region (taken from an execute-api host name when empty) with creds at now. The body's SHA-256
// is part of the signature, so the body cannot be changed on the way.
func NewSignedRequest(ctx context.Context, c Call, creds aws.Credentials, region string, now time.Time) (*http.Request, error) {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("pay: %q is not an http(s) URL", c.URL)
	}
	if region == "" {
		region = RegionFromHost(u.Hostname())
	}
	if region == "" {
		return nil, errNoRegion
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, u.String(), bytes.NewReader(c.Body))
	if err != nil {
		return nil, fmt.Errorf("pay: %w", err)
	}
	if c.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", c.IdempotencyKey)
	}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, sha256Hex(c.Body), Service, region, now); err != nil {
		return nil, fmt.Errorf("pay: sign: %w", err)
	}
	return req, nil
}

// RegionFromHost returns the region of an API Gateway host name
// (<api-id>.execute-api.<region>.amazonaws.com), or "" for any other host.
func RegionFromHost(host string) string {
	parts := strings.Split(host, ".")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "execute-api" {
			return parts[i+1]
		}
	}
	return ""
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
