package gateway

import (
	"encoding/base64"
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

// NewEvent returns ev, the payload v2.0 event of a matched route, completed as API Gateway HTTP
// API would hand it to a Lambda integration for r, whose body has already been read into body.
// The caller sets what the gateway knows besides the request: RouteKey, PathParameters, and
// RequestContext's RequestID and TimeEpoch (when r was received). NewEvent adds:
//
//   - header names lower-cased, the values of a repeated header joined with commas, and the
//     Cookie header moved, split, into cookies;
//   - rawPath and rawQueryString as sent;
//   - requestContext's routeKey, stage ($default), domainName, time and http;
//   - body base64-encoded, with isBase64Encoded set, when it is not valid UTF-8 or its
//     content-type is not a text type (isText).
//
// What else a deployed gateway adds and no function reads (queryStringParameters, the
// x-forwarded-* and x-amzn-trace-id headers, accountId, apiId, domainPrefix) is left to the caller.
func NewEvent(r *http.Request, body []byte, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
	ev.Version, ev.RawPath, ev.RawQueryString = "2.0", r.URL.EscapedPath(), r.URL.RawQuery
	ev.Headers = map[string]string{}
	for name, values := range r.Header {
		ev.Headers[strings.ToLower(name)] = strings.Join(values, ",")
	}
	for c := range strings.SplitSeq(strings.Join(r.Header.Values("Cookie"), ";"), ";") {
		if c = strings.TrimSpace(c); c != "" {
			ev.Cookies = append(ev.Cookies, c)
		}
	}
	slices.Sort(ev.Cookies)
	delete(ev.Headers, "cookie")
	delete(ev.Headers, "transfer-encoding")
	ev.Headers["host"] = r.Host
	if len(body) > 0 {
		ev.Headers["content-length"] = strconv.Itoa(len(body)) // a chunked body arrives whole
	}
	rc := &ev.RequestContext
	rc.RouteKey, rc.Stage, rc.DomainName = ev.RouteKey, "$default", hostOnly(r.Host)
	rc.Time = time.UnixMilli(rc.TimeEpoch).UTC().Format("02/Jan/2006:15:04:05 -0700") // "21/Apr/2020:15:08:21 +0000"
	rc.HTTP = events.APIGatewayV2HTTPRequestContextHTTPDescription{
		Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: hostOnly(r.RemoteAddr), UserAgent: r.UserAgent(),
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

// hostOnly returns the host of a host:port, or hostport itself when it has no port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// isText reports whether a body of the given content-type travels as text in an event, rather
// than base64-encoded: no content-type at all, text/*, and the structured-text application
// types (JSON, XML, JavaScript, form-encoded, GraphQL, YAML, and any +json or +xml suffix).
func isText(contentType string) bool {
	if strings.TrimSpace(contentType) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") ||
		slices.Contains([]string{"application/json", "application/xml", "application/javascript", "application/x-www-form-urlencoded",
			"application/graphql", "application/x-ndjson", "application/yaml", "application/x-yaml"}, mt))
}

// PathParameters matches the escaped path against the path of route r and returns the values
// of its {name} parameters, decoded as the gateway passes them, or false when the path does not
// match.
func PathParameters(r samtemplate.Route, escapedPath string) (map[string]string, bool) {
	want, got := strings.Split(r.Path, "/"), strings.Split(escapedPath, "/")
	if len(want) != len(got) {
		return nil, false
	}
	params := map[string]string{}
	for i, seg := range want {
		name, isParam := strings.CutPrefix(seg, "{")
		v, err := url.PathUnescape(got[i])
		switch {
		case err != nil, !isParam && v != seg, isParam && v == "":
			return nil, false
		case isParam:
			params[strings.TrimSuffix(name, "}")] = v
		}
	}
	return params, true
}

// RequestID returns the request ID API Gateway's shape gives seed: its first 11 bytes in
// URL-safe base64, e.g. "LV7fzho-PHcEJPw=".
func RequestID(seed [32]byte) string {
	return base64.URLEncoding.EncodeToString(seed[:11])
}
