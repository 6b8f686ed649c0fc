// Package apigw holds what every function needs to speak API Gateway HTTP API payload v2.0:
// the raw request body, JSON responses, and error bodies with a stable machine code.
package apigw

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// DefaultBodyLimit is the largest request body accepted unless a function sets its own: 1 MiB.
const DefaultBodyLimit = 1 << 20

// ErrBodyTooLarge is returned by Body when the decoded body exceeds the limit.
var ErrBodyTooLarge = errors.New("apigw: body too large")

// ErrBadEncoding is returned by Body when isBase64Encoded is set but the body is not base64.
var ErrBadEncoding = errors.New("apigw: body is not valid base64")

// Body returns the raw request bytes, decoding base64 first when API Gateway encoded them:
// signatures are always computed over these bytes. A body over limit bytes is ErrBodyTooLarge.
func Body(req events.APIGatewayV2HTTPRequest, limit int) ([]byte, error) {
	if !req.IsBase64Encoded {
		if len(req.Body) > limit {
			return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, len(req.Body), limit)
		}
		return []byte(req.Body), nil
	}
	if base64.StdEncoding.DecodedLen(len(req.Body)) > limit+2 {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, limit)
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEncoding, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, len(b), limit)
	}
	return b, nil
}

// Header returns the header called name (lower-case) from an event's headers, "" when absent.
// API Gateway v2 lower-cases header names and joins repeated headers with commas; headers from
// another caller (a test, a local tool) that kept their case are still found.
func Header(headers map[string]string, name string) string {
	if v, ok := headers[name]; ok {
		return v
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// JSON returns a response with v encoded as its JSON body and content-type application/json.
// headers are added as name, value pairs.
func JSON(status int, v any, headers ...string) events.APIGatewayV2HTTPResponse {
	body, err := json.Marshal(v)
	if err != nil {
		return Error(500, "internal_error", "response could not be encoded")
	}
	return Raw(status, body, headers...)
}

// Raw returns a response whose body is already JSON.
func Raw(status int, body []byte, headers ...string) events.APIGatewayV2HTTPResponse {
	h := make(map[string]string, 1+len(headers)/2)
	h["content-type"] = "application/json"
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: h, Body: string(body)}
}

// ErrorBody is the JSON shape of every error response: {"error": {"code": ..., "message": ...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody. Code is stable and meant for machines.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error returns an error response with a stable machine code and a human message.
func Error(status int, code, message string, headers ...string) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: code, Message: message}})
	return Raw(status, body, headers...)
}

// RetryAfter formats d for a retry-after header: whole seconds, rounded up, at least 1.
func RetryAfter(d time.Duration) string {
	s := math.Ceil(d.Seconds())
	if s < 1 || math.IsNaN(s) {
		s = 1
	}
	return strconv.FormatInt(int64(s), 10)
}

// HTTPHeader returns an event's headers as net/http holds them: canonical names, one value
// each (API Gateway has already joined a repeated header with commas).
func HTTPHeader(headers map[string]string) http.Header {
	h := make(http.Header, len(headers))
	fillHTTPHeader(h, make([]string, len(headers)), headers, textproto.CanonicalMIMEHeaderKey)
	return h
}

// fillHTTPHeader puts headers into h under the names canonical gives them, their values on
// the backing array values (len(headers) long).
func fillHTTPHeader(h http.Header, values []string, headers map[string]string, canonical func(string) string) {
	i := 0
	for k, v := range headers {
		values[i] = v
		h[canonical(k)] = values[i : i+1 : i+1]
		i++
	}
}

// BorrowedHeader is an event's headers as HTTPHeader returns them, in a map borrowed from a
// pool: a request path that only reads the headers while it verifies a request costs no
// allocation for them. The values read from it are the event's strings and may be kept; the
// map itself must not be once Release is called.
type BorrowedHeader struct {
	// Header holds the headers, canonical names, one value each.
	Header http.Header
	values []string
	// names remembers the canonical form of the names seen before, so that a
	// lower-cased name costs no allocation the next time.
	names map[string]string
}

// Bounds of what a borrowed header keeps for the next request: a larger one is left to the
// collector, and names past maxCachedNames are canonicalised anew each time.
const (
	maxPooledHeaders = 64
	maxCachedNames   = 128
)

var borrowedHeaders = sync.Pool{New: func() any {
	return &BorrowedHeader{Header: make(http.Header, 16), names: make(map[string]string, 16)}
}}

// BorrowHTTPHeader returns headers as HTTPHeader does, in a borrowed map; call Release once
// nothing reads the map any more.
func BorrowHTTPHeader(headers map[string]string) *BorrowedHeader {
	b := borrowedHeaders.Get().(*BorrowedHeader)
	if cap(b.values) < len(headers) {
		b.values = make([]string, len(headers))
	}
	b.values = b.values[:len(headers)]
	fillHTTPHeader(b.Header, b.values, headers, b.canonical)
	return b
}

// canonical is textproto.CanonicalMIMEHeaderKey(name), remembered.
func (b *BorrowedHeader) canonical(name string) string {
	if c, ok := b.names[name]; ok {
		return c
	}
	c := textproto.CanonicalMIMEHeaderKey(name)
	if len(b.names) < maxCachedNames {
		b.names[name] = c
	}
	return c
}

// Release returns the map to the pool: neither it nor b may be used afterwards.
func (b *BorrowedHeader) Release() {
	if len(b.Header) > maxPooledHeaders {
		return
	}
	clear(b.Header)
	clear(b.values)
	b.values = b.values[:0]
	borrowedHeaders.Put(b)
}

// PublicURL rebuilds the URL a sender posted to from what an API Gateway HTTP API event
// (payload v2.0) reports: requestContext.domainName, rawPath and rawQueryString. API Gateway
// only answers HTTPS. A non-empty override (WEBHOOK_PUBLIC_URL) replaces scheme, host and
// path; the query string of the request is appended to either, since senders add to it
// (Twilio's bodySHA256).
func PublicURL(domainName, rawPath, rawQueryString, override string) string {
	base := override
	if base == "" {
		if domainName == "" {
			return ""
		}
		if rawPath == "" {
			rawPath = "/"
		}
		base = "https://" + domainName + rawPath
	}
	if rawQueryString == "" {
		return base
	}
	return base + "?" + rawQueryString
}

// EventHeaders returns headers as API Gateway payload v2.0 delivers them: lower-cased names,
// the values of a repeated header joined with commas.
func EventHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = strings.Join(v, ",")
	}
	return out
}
