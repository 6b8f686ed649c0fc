package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// Request-context values that only a deployed API has; local events carry these stand-ins.
const (
	// AccountID is the account of every local event, the placeholder AWS documents use.
	AccountID = "123456789012"
	// Stage is the stage of every local event: the HTTP API's default stage, which puts no
	// prefix in front of the path.
	Stage = "$default"
)

// timeLayout is the format of requestContext.time: "21/Apr/2020:15:08:21 +0000".
const timeLayout = "02/Jan/2006:15:04:05 -0700"

// EventInput is what an event is made from besides the HTTP request.
type EventInput struct {
	// RouteKey is the matched route, e.g. "POST /webhooks/stripe" or "$default".
	RouteKey string
	// PathParameters are the values of the route's {name} parameters, nil when it has none.
	PathParameters map[string]string
	// APIID is the API's ID, which is also the first label of its domain name.
	APIID string
	// RequestID is the gateway's request ID (also sent back as apigw-requestid).
	RequestID string
	// Time is when the gateway received the request.
	Time time.Time
}

// NewEvent returns the payload v2.0 event API Gateway HTTP API would hand a Lambda
// integration for r, whose body has already been read into body:
//
//   - header names lower-cased, the values of a repeated header joined with commas, and the
//     Cookie header moved, split, into cookies; x-forwarded-for/-port/-proto and
//     x-amzn-trace-id added as the gateway adds them;
//   - rawPath and rawQueryString as sent, queryStringParameters decoded, with the values of a
//     repeated parameter joined with commas;
//   - body base64-encoded, with isBase64Encoded set, when it is not valid UTF-8 or its
//     content-type is not a text type (IsText).
func NewEvent(r *http.Request, body []byte, in EventInput) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	var cookies []string
	for name, values := range r.Header {
		lower := strings.ToLower(name)
		if lower == "cookie" {
			for _, v := range values {
				for c := range strings.SplitSeq(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[lower] = strings.Join(values, ",")
	}
	headers["host"] = r.Host
	if len(body) > 0 {
		headers["content-length"] = strconv.Itoa(len(body)) // a chunked body arrives whole
	}
	delete(headers, "transfer-encoding")
	sourceIP := clientIP(r)
	if prior := headers["x-forwarded-for"]; prior != "" {
		headers["x-forwarded-for"] = prior + ", " + sourceIP
	} else {
		headers["x-forwarded-for"] = sourceIP
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if _, port, err := net.SplitHostPort(r.Host); err == nil {
		headers["x-forwarded-port"] = port
	} else if scheme == "https" {
		headers["x-forwarded-port"] = "443"
	} else {
		headers["x-forwarded-port"] = "80"
	}
	headers["x-forwarded-proto"] = scheme
	if headers["x-amzn-trace-id"] == "" {
		headers["x-amzn-trace-id"] = traceID(in.Time)
	}

	var query map[string]string
	if r.URL.RawQuery != "" {
		values, _ := url.ParseQuery(r.URL.RawQuery) // a malformed pair is skipped, as the gateway does
		if len(values) > 0 {
			query = make(map[string]string, len(values))
			for k, v := range values {
				query[k] = strings.Join(v, ",")
			}
		}
	}

	host := r.Host
	if h, _, err := net.SplitHostPort(r.Host); err == nil {
		host = h
	}
	prefix, _, _ := strings.Cut(host, ".")

	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              in.RouteKey,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        in.PathParameters,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     in.RouteKey,
			AccountID:    AccountID,
			Stage:        Stage,
			RequestID:    in.RequestID,
			APIID:        in.APIID,
			DomainName:   host,
			DomainPrefix: prefix,
			Time:         in.Time.UTC().Format(timeLayout),
			TimeEpoch:    in.Time.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) && IsText(r.Header.Get("Content-Type")) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	slices.Sort(ev.Cookies)
	return ev
}

// IsText reports whether a body of the given content-type travels as text in an event, rather
// than base64-encoded: no content-type at all, text/*, and the structured-text application
// types (JSON, XML, JavaScript, form-encoded, GraphQL, YAML, and any +json or +xml suffix).
func IsText(contentType string) bool {
	if strings.TrimSpace(contentType) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	if strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-www-form-urlencoded",
		"application/graphql", "application/x-ndjson", "application/yaml", "application/x-yaml":
		return true
	}
	return false
}

// clientIP is the peer's address without its port.
func clientIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// NewRequestID returns a random request ID shaped like API Gateway's, e.g. "LV7fzho-PHcEJPw=".
func NewRequestID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return RequestID(b)
}

// RequestID returns the request ID API Gateway's shape gives seed: its first 11 bytes in
// URL-safe base64, e.g. "LV7fzho-PHcEJPw=".
func RequestID(seed [32]byte) string {
	return base64.URLEncoding.EncodeToString(seed[:11])
}

// traceID returns an X-Ray trace header like the one the gateway adds:
// Root=1-<8 hex digits of Unix seconds>-<24 random hex digits>.
func traceID(t time.Time) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("Root=1-%08x-%s", t.Unix(), hex.EncodeToString(b[:]))
}

// newUUID returns a random version 4 UUID, the shape of a Lambda request ID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
