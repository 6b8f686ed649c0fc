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

	"github.com/idemlambda/idem/internal/samtemplate"
)

// Request-context values that only a deployed API has; local events carry these stand-ins.
const (
	// AccountID is the account of every local event, the placeholder AWS documents use.
	AccountID = "123456789012"
	// Stage is the stage of every local event: the HTTP API's default stage, which puts no
	// prefix in front of the path.
	Stage = "$default"
	// DefaultAPIID is the apiId of the gateway's events.
	DefaultAPIID = "localapi00"
)

// timeLayout is the format of requestContext.time: "21/Apr/2020:15:08:21 +0000".
const timeLayout = "02/Jan/2006:15:04:05 -0700"

// EventInput is what an event is made from besides the HTTP request.
type EventInput struct {
	RouteKey       string            // the matched route, e.g. "POST /webhooks/stripe" or "$default"
	PathParameters map[string]string // the values of the route's parameters (PathParameters)
	APIID          string            // the API's ID
	RequestID      string            // the gateway's request ID (also sent back as apigw-requestid)
	Time           time.Time         // when the gateway received the request
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
//     content-type is not a text type (isText).
func NewEvent(r *http.Request, body []byte, in EventInput) events.APIGatewayV2HTTPRequest {
	sourceIP := r.RemoteAddr
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = h
	}
	headers, cookies := eventHeaders(r, body, sourceIP, in.Time)
	var query map[string]string
	if values, _ := url.ParseQuery(r.URL.RawQuery); len(values) > 0 { // a malformed pair is skipped, as the gateway does
		query = make(map[string]string, len(values))
		for k, v := range values {
			query[k] = strings.Join(v, ",")
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
	switch {
	case len(body) == 0:
	case utf8.Valid(body) && isText(r.Header.Get("Content-Type")):
		ev.Body = string(body)
	default:
		ev.Body = base64.StdEncoding.EncodeToString(body)
		ev.IsBase64Encoded = true
	}
	return ev
}

// eventHeaders returns the headers and the cookies of r's event, as NewEvent describes them.
func eventHeaders(r *http.Request, body []byte, sourceIP string, received time.Time) (map[string]string, []string) {
	headers := map[string]string{}
	var cookies []string
	for name, values := range r.Header {
		headers[strings.ToLower(name)] = strings.Join(values, ",")
	}
	for _, c := range strings.Split(strings.Join(r.Header.Values("Cookie"), ";"), ";") {
		if c = strings.TrimSpace(c); c != "" {
			cookies = append(cookies, c)
		}
	}
	slices.Sort(cookies)
	delete(headers, "cookie")
	delete(headers, "transfer-encoding")
	headers["host"] = r.Host
	if len(body) > 0 {
		headers["content-length"] = strconv.Itoa(len(body)) // a chunked body arrives whole
	}
	headers["x-forwarded-for"] = strings.TrimPrefix(headers["x-forwarded-for"]+", "+sourceIP, ", ")
	scheme, port := "http", "80"
	if r.TLS != nil {
		scheme, port = "https", "443"
	}
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		port = p
	}
	headers["x-forwarded-port"], headers["x-forwarded-proto"] = port, scheme
	if headers["x-amzn-trace-id"] == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		headers["x-amzn-trace-id"] = fmt.Sprintf("Root=1-%08x-%s", received.Unix(), hex.EncodeToString(b[:]))
	}
	return headers, cookies
}

// isText reports whether a body of the given content-type travels as text in an event, rather
// than base64-encoded: no content-type at all, text/*, and the structured-text application
// types (JSON, XML, JavaScript, form-encoded, GraphQL, YAML, and any +json or +xml suffix).
func isText(contentType string) bool {
	if strings.TrimSpace(contentType) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return false
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	return slices.Contains([]string{"application/json", "application/xml", "application/javascript", "application/x-www-form-urlencoded",
		"application/graphql", "application/x-ndjson", "application/yaml", "application/x-yaml"}, mt)
}

// PathParameters matches the escaped path against the path of route r and returns the values
// of its {name} and greedy {name+} parameters, decoded as the gateway passes them (nil when it
// has none), or false when the path does not match.
func PathParameters(r samtemplate.Route, escapedPath string) (map[string]string, bool) {
	if r.Path == "$default" {
		return nil, true
	}
	want, got := strings.Split(r.Path, "/"), strings.Split(escapedPath, "/")
	var params map[string]string
	for i, seg := range want {
		name, isParam := strings.CutPrefix(seg, "{")
		name, closed := strings.CutSuffix(name, "}")
		name, greedy := strings.CutSuffix(name, "+")
		isParam, greedy = isParam && closed, greedy && isParam && closed
		if i >= len(got) {
			return nil, false
		}
		if greedy {
			got[i] = strings.Join(got[i:], "/")
			got = got[:i+1]
		}
		v, err := url.PathUnescape(got[i])
		switch {
		case err != nil, !isParam && v != seg, isParam && v == "":
			return nil, false
		case isParam:
			if params == nil {
				params = map[string]string{}
			}
			params[name] = v
		}
	}
	return params, len(got) == len(want)
}

// RequestID returns the request ID API Gateway's shape gives seed: its first 11 bytes in
// URL-safe base64, e.g. "LV7fzho-PHcEJPw=".
func RequestID(seed [32]byte) string {
	return base64.URLEncoding.EncodeToString(seed[:11])
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
