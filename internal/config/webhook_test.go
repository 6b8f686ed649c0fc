package config_test

import (
	"errors"
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
