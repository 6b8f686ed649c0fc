package webhook_test

import (
	"errors"
	"testing"

	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/webhook"
)

func TestPublicURLIsRebuiltFromTheAPIGatewayEvent(t *testing.T) {
	cases := []struct {
		domain, path, query, override, want string
	}{
		{"abc123.execute-api.eu-west-1.amazonaws.com", "/webhooks/twilio", "", "", "https://abc123.execute-api.eu-west-1.amazonaws.com/webhooks/twilio"},
		{"abc123.execute-api.eu-west-1.amazonaws.com", "/prod/webhooks/twilio", "foo=1&bar=2", "", "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/webhooks/twilio?foo=1&bar=2"},
		{"abc123.execute-api.eu-west-1.amazonaws.com", "/webhooks/twilio", "bodySHA256=ab", "https://hooks.example.com/twilio", "https://hooks.example.com/twilio?bodySHA256=ab"},
		{"", "", "", "", ""},
	}
	for _, c := range cases {
		if got := webhook.PublicURL(c.domain, c.path, c.query, c.override); got != c.want {
			t.Errorf("PublicURL(%q, %q, %q, %q) = %q, want %q", c.domain, c.path, c.query, c.override, got, c.want)
		}
	}
}

func TestPublicURLSettingIsChecked(t *testing.T) {
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == webhook.PublicURLSetting {
				return v
			}
			return ""
		}
	}
	if u, err := webhook.PublicURLFromEnv(env("")); err != nil || u != "" {
		t.Fatalf("unset: %q, %v", u, err)
	}
	if u, err := webhook.PublicURLFromEnv(env("https://hooks.example.com/twilio")); err != nil || u != "https://hooks.example.com/twilio" {
		t.Fatalf("valid: %q, %v", u, err)
	}
	for _, bad := range []string{"hooks.example.com/twilio", "ftp://x/y", "https:///path", "https://x/y?a=1", "https://x/y#f", "://"} {
		_, err := webhook.PublicURLFromEnv(env(bad))
		var se *setting.Error
		if !errors.As(err, &se) || se.Var != webhook.PublicURLSetting {
			t.Errorf("%q: %v, want a *setting.Error naming %s", bad, err, webhook.PublicURLSetting)
		}
	}
}

// The Square vector verifies through a URL rebuilt from an API Gateway
// event when the override names the URL pasted into Square.
func TestSquareVerifiesBehindACustomDomain(t *testing.T) {
	v := presetVerifier(t, "square", squareKey)
	r := squareRequest(webhook.PublicURL("abc.execute-api.us-east-1.amazonaws.com", "/webhooks/square", "", squareURL), squareBody, squareSig)
	if err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
	r.URL = webhook.PublicURL("abc.execute-api.us-east-1.amazonaws.com", "/webhooks/square", "", "")
	if err := v.Verify(r); !errors.Is(err, webhook.ErrNoValidSignature) {
		t.Fatalf("without the override: %v", err)
	}
}
