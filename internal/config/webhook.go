package config

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/webhook"
)

// HMACProvider is the WEBHOOK_PROVIDER value of the configurable verifier
// (webhook.NewHMAC), described by the WEBHOOK_HMAC_* settings.
const HMACProvider = "hmac"

// The settings of the configurable verifier, one per webhook.HMACConfig
// field; each field's doc comment states its default.
const (
	// HMACHeaderSetting is HMACConfig.Header. Required.
	HMACHeaderSetting = "WEBHOOK_HMAC_HEADER"
	// HMACAlgorithmSetting is HMACConfig.Algorithm: sha1, sha256 or sha512.
	HMACAlgorithmSetting = "WEBHOOK_HMAC_ALGORITHM"
	// HMACEncodingSetting is HMACConfig.Encoding: hex or base64.
	HMACEncodingSetting = "WEBHOOK_HMAC_ENCODING"
	// HMACPrefixSetting is HMACConfig.Prefix ("sha256=", "v0=").
	HMACPrefixSetting = "WEBHOOK_HMAC_PREFIX"
	// HMACHeaderFormatSetting is HMACConfig.HeaderFormat, such as
	// "t={timestamp},v1={signature}".
	HMACHeaderFormatSetting = "WEBHOOK_HMAC_HEADER_FORMAT"
	// HMACTimestampHeaderSetting is HMACConfig.TimestampHeader.
	HMACTimestampHeaderSetting = "WEBHOOK_HMAC_TIMESTAMP_HEADER"
	// HMACTimestampFormatSetting is HMACConfig.TimestampFormat: unix,
	// unix-ms or rfc3339.
	HMACTimestampFormatSetting = "WEBHOOK_HMAC_TIMESTAMP_FORMAT"
	// HMACToleranceSetting is HMACConfig.Tolerance, a Go duration.
	HMACToleranceSetting = "WEBHOOK_HMAC_TOLERANCE"
	// HMACIDHeaderSetting is HMACConfig.IDHeader.
	HMACIDHeaderSetting = "WEBHOOK_HMAC_ID_HEADER"
	// HMACLayoutSetting is HMACConfig.Layout, such as "{timestamp}.{body}".
	HMACLayoutSetting = "WEBHOOK_HMAC_LAYOUT"
	// HMACEventIDSetting is HMACConfig.EventID: digest, header or
	// body:<dotted.path>.
	HMACEventIDSetting = "WEBHOOK_HMAC_EVENT_ID"
	// HMACEventTypeSetting is HMACConfig.EventType: body:<dotted.path> or
	// header:<name>.
	HMACEventTypeSetting = "WEBHOOK_HMAC_EVENT_TYPE"
	// HMACSecretFormatSetting is HMACConfig.SecretFormat: raw or whsec.
	HMACSecretFormatSetting = "WEBHOOK_HMAC_SECRET_FORMAT"
	// HMACResultTTLSetting is HMACConfig.ResultTTL, a Go duration.
	HMACResultTTLSetting = "WEBHOOK_HMAC_RESULT_TTL"

	// PublicURLSetting overrides the public URL of a webhook function: the
	// URL a sender posts to (scheme, host and path, as pasted into its
	// settings) when that is not the API Gateway URL, behind a custom
	// domain, a CDN or a proxy. URL-signing senders (Twilio, Square,
	// HubSpot) sign it. Unset, the URL is rebuilt from the event.
	PublicURLSetting = "WEBHOOK_PUBLIC_URL"

	// AllowLegacySignaturesSetting, "true", makes a preset with older
	// signature versions accept them when the current one is absent
	// (HubSpot's v1 and v2, which sign no timestamp: docs/providers.md).
	// Refused for a sender without such versions. Default false.
	AllowLegacySignaturesSetting = "WEBHOOK_ALLOW_LEGACY_SIGNATURES"
)

// hmacFieldSettings names the setting of each HMACConfig field.
var hmacFieldSettings = map[string]string{
	"Header":          HMACHeaderSetting,
	"Algorithm":       HMACAlgorithmSetting,
	"Encoding":        HMACEncodingSetting,
	"Prefix":          HMACPrefixSetting,
	"HeaderFormat":    HMACHeaderFormatSetting,
	"TimestampHeader": HMACTimestampHeaderSetting,
	"TimestampFormat": HMACTimestampFormatSetting,
	"Tolerance":       HMACToleranceSetting,
	"IDHeader":        HMACIDHeaderSetting,
	"Layout":          HMACLayoutSetting,
	"EventID":         HMACEventIDSetting,
	"EventType":       HMACEventTypeSetting,
	"SecretFormat":    HMACSecretFormatSetting,
	"ResultTTL":       HMACResultTTLSetting,
}

// HMACFromEnv reads the WEBHOOK_HMAC_* settings through getenv into the
// configurable verifier's configuration. A malformed duration is a
// *setting.Error naming its variable; the rest is checked by NewVerifier.
func HMACFromEnv(getenv func(string) string) (webhook.HMACConfig, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	cfg := webhook.HMACConfig{
		Header:          get(HMACHeaderSetting),
		Algorithm:       get(HMACAlgorithmSetting),
		Encoding:        get(HMACEncodingSetting),
		Prefix:          get(HMACPrefixSetting),
		HeaderFormat:    get(HMACHeaderFormatSetting),
		TimestampHeader: get(HMACTimestampHeaderSetting),
		TimestampFormat: get(HMACTimestampFormatSetting),
		IDHeader:        get(HMACIDHeaderSetting),
		Layout:          get(HMACLayoutSetting),
		EventID:         get(HMACEventIDSetting),
		EventType:       get(HMACEventTypeSetting),
		SecretFormat:    get(HMACSecretFormatSetting),
	}
	var err error
	if cfg.Tolerance, err = duration(get(HMACToleranceSetting), HMACToleranceSetting); err != nil {
		return cfg, err
	}
	if raw := get(HMACToleranceSetting); raw != "" && cfg.Tolerance == 0 {
		return cfg, setting.Errorf(HMACToleranceSetting, "must be positive; leave it unset for the default")
	}
	if cfg.ResultTTL, err = duration(get(HMACResultTTLSetting), HMACResultTTLSetting); err != nil {
		return cfg, err
	}
	if raw := get(HMACResultTTLSetting); raw != "" && cfg.ResultTTL == 0 {
		return cfg, setting.Errorf(HMACResultTTLSetting, "must be positive")
	}
	return cfg, nil
}

// duration reads a Go duration setting; 0 when empty.
func duration(raw, name string) (time.Duration, error) {
	if raw == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		return 0, setting.Errorf(name, "not a Go duration (e.g. 5m): %v", err)
	}
	if d < 0 {
		return 0, setting.Errorf(name, "must not be negative")
	}
	return d, nil
}

// NewVerifier returns the verifier of a function deployed with
// WEBHOOK_PROVIDER=provider: a named sender (webhook.New), or for
// HMACProvider the one the WEBHOOK_HMAC_* settings describe, read through
// getenv. An unusable WEBHOOK_HMAC_* setting is a *setting.Error naming it;
// the other errors are webhook.New's, for the caller to name the variable
// of the secrets or the tolerance.
func NewVerifier(provider string, secrets []string, tolerance time.Duration, getenv func(string) string) (*webhook.Verifier, error) {
	legacy, ok, err := legacyPreset(provider, getenv)
	if err != nil {
		return nil, err
	}
	if ok {
		return legacyVerifier(legacy, secrets, tolerance)
	}
	if provider != HMACProvider {
		return webhook.New(provider, secrets, tolerance)
	}
	cfg, err := HMACFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if tolerance > 0 {
		cfg.Tolerance = tolerance
	}
	v, err := webhook.NewHMAC(cfg, secrets)
	var ce *webhook.ConfigError
	if errors.As(err, &ce) {
		return nil, &setting.Error{Var: hmacFieldSettings[ce.Field], Reason: ce.Reason}
	}
	return v, err
}

// legacyPreset reads AllowLegacySignaturesSetting: when it is on, provider's
// preset with its legacy signatures allowed (refused for a preset that has no
// older signature versions); ok is false when it is off.
func legacyPreset(provider string, getenv func(string) string) (p preset.Preset, ok bool, err error) {
	raw := strings.TrimSpace(getenv(AllowLegacySignaturesSetting))
	if raw == "" {
		return p, false, nil
	}
	on, err := strconv.ParseBool(raw)
	if err != nil {
		return p, false, setting.Errorf(AllowLegacySignaturesSetting, "want true or false, got %q", raw)
	}
	if !on {
		return p, false, nil
	}
	if p, ok = preset.Lookup(provider); !ok || p.Legacy.SignatureHeader == "" {
		return p, false, setting.Errorf(AllowLegacySignaturesSetting, "%s has no legacy signatures to allow (only hubspot has)", provider)
	}
	p.AllowLegacySignatures = true
	return p, true, nil
}

// legacyVerifier is the verifier of p, a preset with an option webhook.New
// does not offer.
func legacyVerifier(p preset.Preset, secrets []string, tolerance time.Duration) (*webhook.Verifier, error) {
	v, err := preset.NewVerifier(p, secrets, tolerance)
	if err != nil {
		return nil, err
	}
	return v.(*webhook.Verifier), nil
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
