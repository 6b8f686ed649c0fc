package webhook

import (
	"net/url"
	"strings"

	"github.com/idemlambda/idem/internal/setting"
)

// PublicURLSetting is the environment variable that overrides the public
// URL of a function: the URL a sender posts to (scheme, host and path, as
// pasted into its settings) when that is not the API Gateway URL, behind a
// custom domain, a CDN or a proxy. Unset, the URL is rebuilt from the API
// Gateway event. URL-signing senders (Twilio, Square, HubSpot) sign it.
const PublicURLSetting = "WEBHOOK_PUBLIC_URL"

// PublicURL rebuilds the URL a sender posted to from what an API Gateway
// HTTP API event (payload v2.0) reports: requestContext.domainName, rawPath
// and rawQueryString. API Gateway only answers HTTPS. A non-empty override
// (PublicURLSetting, checked by PublicURLFromEnv) replaces scheme, host and
// path; the query string of the request is appended to either, since
// senders add to it (Twilio's bodySHA256).
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

// PublicURLFromEnv reads PublicURLSetting through getenv: "" when unset,
// else an absolute http(s) URL with a host and without query or fragment (the
// request's own query string is appended per request). A malformed value is
// a *setting.Error.
func PublicURLFromEnv(getenv func(string) string) (string, error) {
	raw := strings.TrimSpace(getenv(PublicURLSetting))
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", setting.Errorf(PublicURLSetting, "not a URL: %v", err)
	case u.Scheme != "https" && u.Scheme != "http":
		return "", setting.Errorf(PublicURLSetting, "scheme must be https (or http), got %q", u.Scheme)
	case u.Host == "":
		return "", setting.Errorf(PublicURLSetting, "no host")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", setting.Errorf(PublicURLSetting, "give scheme, host and path only: the request's query string is appended")
	}
	return raw, nil
}
