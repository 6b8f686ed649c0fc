package config_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/webhook"
)

func envOf(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

func TestHMACSettingsErrorsNameTheSetting(t *testing.T) {
	base := map[string]string{"WEBHOOK_HMAC_HEADER": "x-sig"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return m
	}
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "WEBHOOK_HMAC_HEADER"},
		{with("WEBHOOK_HMAC_ALGORITHM", "md5"), "WEBHOOK_HMAC_ALGORITHM"},
		{with("WEBHOOK_HMAC_ENCODING", "base32"), "WEBHOOK_HMAC_ENCODING"},
		{with("WEBHOOK_HMAC_TIMESTAMP_FORMAT", "iso"), "WEBHOOK_HMAC_TIMESTAMP_FORMAT"},
		{with("WEBHOOK_HMAC_HEADER_FORMAT", "sig={signature}"), "WEBHOOK_HMAC_HEADER_FORMAT"},
		{with("WEBHOOK_HMAC_LAYOUT", "{body}{bogus}"), "WEBHOOK_HMAC_LAYOUT"},
		{with("WEBHOOK_HMAC_LAYOUT", "{timestamp}.{body}"), "WEBHOOK_HMAC_LAYOUT"},
		{with("WEBHOOK_HMAC_LAYOUT", "{id}{body}"), "WEBHOOK_HMAC_LAYOUT"},
		{with("WEBHOOK_HMAC_TOLERANCE", "5 minutes"), "WEBHOOK_HMAC_TOLERANCE"},
		{with("WEBHOOK_HMAC_TOLERANCE", "5m"), "WEBHOOK_HMAC_TOLERANCE"}, // nothing signs a timestamp
		{with("WEBHOOK_HMAC_RESULT_TTL", "-1h"), "WEBHOOK_HMAC_RESULT_TTL"},
		{with("WEBHOOK_HMAC_EVENT_ID", "header"), "WEBHOOK_HMAC_EVENT_ID"}, // no signed id header
		{with("WEBHOOK_HMAC_EVENT_ID", "x-request-id"), "WEBHOOK_HMAC_EVENT_ID"},
		{with("WEBHOOK_HMAC_EVENT_TYPE", "topic"), "WEBHOOK_HMAC_EVENT_TYPE"},
		{with("WEBHOOK_HMAC_SECRET_FORMAT", "hex"), "WEBHOOK_HMAC_SECRET_FORMAT"},
	}
	for _, c := range cases {
		_, err := config.NewVerifier(config.HMACProvider, []string{"s"}, 0, envOf(c.env))
		var se *setting.Error
		if !errors.As(err, &se) || se.Var != c.want {
			t.Errorf("%v: %v, want a *setting.Error naming %s", c.env, err, c.want)
		}
	}
}

func TestHMACSettingsMakeAVerifier(t *testing.T) {
	v, err := config.NewVerifier(config.HMACProvider, []string{"s"}, 0, envOf(map[string]string{
		config.HMACHeaderSetting: "x-sig", config.HMACTimestampHeaderSetting: "x-ts", config.HMACResultTTLSetting: "30h",
	}))
	if err != nil || v.ResultTTL() != 30*time.Hour {
		t.Fatalf("verifier %v, %v", v, err)
	}
	if _, err := config.NewVerifier("stripe", []string{"s"}, 0, envOf(nil)); err != nil {
		t.Fatalf("a named provider: %v", err)
	}
	if _, err := config.NewVerifier("nope", []string{"s"}, 0, envOf(nil)); !errors.Is(err, webhook.ErrUnknownProvider) {
		t.Fatalf("an unknown provider: %v", err)
	}
}

// A tolerance as long as the retention would let a delivery captured once be
// replayed after its result expired: refused, for the configured verifier too.
func TestHMACToleranceMustBeBelowTheRetention(t *testing.T) {
	_, err := config.NewVerifier(config.HMACProvider, []string{"s"}, 0, envOf(map[string]string{
		config.HMACHeaderSetting: "x-sig", config.HMACTimestampHeaderSetting: "x-ts",
		config.HMACToleranceSetting: "2h", config.HMACResultTTLSetting: "1h",
	}))
	var se *setting.Error
	if !errors.As(err, &se) || se.Var != config.HMACToleranceSetting {
		t.Fatalf("tolerance over the retention: %v", err)
	}
}

func TestPublicURLSetting(t *testing.T) {
	for raw, ok := range map[string]bool{"": true, "https://hooks.example.com/twilio": true, "ftp://x/y": false, "https://x/y?a=1": false, "https:///y": false} {
		_, err := config.PublicURLFromEnv(envOf(map[string]string{config.PublicURLSetting: raw}))
		var se *setting.Error
		if ok != (err == nil) || (!ok && (!errors.As(err, &se) || se.Var != config.PublicURLSetting)) {
			t.Errorf("%q: %v", raw, err)
		}
	}
}

// HubSpot's published v1 test request, from HubSpot/hubspot-api-nodejs
// test/unit/signature.spec.ts ("Validates v1"): it carries no v3 signature, so
// it verifies only with WEBHOOK_ALLOW_LEGACY_SIGNATURES.
func TestAllowLegacySignaturesSetting(t *testing.T) {
	const (
		secret = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"
		body   = `[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]`
		sig    = "232db2615f3d666fe21a8ec971ac7b5402d33b9a925784df3ca654d05f4817de"
	)
	req := webhook.Request{
		Method: "POST", URL: "https://example.com/webhooks/hubspot", Now: time.Now(), Body: []byte(body),
		Header: http.Header{"Content-Type": {"application/json"}, "X-Hubspot-Signature": {sig}, "X-Hubspot-Signature-Version": {"v1"}},
	}
	for value, accepted := range map[string]bool{"": false, "false": false, "true": true, "1": true} {
		v, err := config.NewVerifier("hubspot", []string{secret}, 0, envOf(map[string]string{config.AllowLegacySignaturesSetting: value}))
		if err != nil {
			t.Fatalf("%q: %v", value, err)
		}
		d, err := v.Verify(req)
		if accepted && (err != nil || d.ID == "") {
			t.Errorf("%s=%q: HubSpot's v1 test request: %v, want accepted", config.AllowLegacySignaturesSetting, value, err)
		}
		if !accepted && !errors.Is(err, webhook.ErrNotSigned) {
			t.Errorf("%s=%q: HubSpot's v1 test request: %v, want ErrNotSigned", config.AllowLegacySignaturesSetting, value, err)
		}
	}
	for _, tc := range []struct{ provider, value string }{{"hubspot", "yes please"}, {"github", "true"}, {config.HMACProvider, "true"}} {
		_, err := config.NewVerifier(tc.provider, []string{secret}, 0, envOf(map[string]string{config.AllowLegacySignaturesSetting: tc.value, config.HMACHeaderSetting: "x-sig"}))
		var se *setting.Error
		if !errors.As(err, &se) || se.Var != config.AllowLegacySignaturesSetting {
			t.Errorf("%s with %s=%q: %v, want an error naming the setting", tc.provider, config.AllowLegacySignaturesSetting, tc.value, err)
		}
	}
}
