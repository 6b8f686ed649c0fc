package webhook

import (
	"slices"
	"strings"
	"time"

	"github.com/idemlambda/idem/internal/setting"
)

// HMACPresetName is the WEBHOOK_PROVIDER value of the configurable verifier.
const HMACPresetName = "hmac"

// The settings of the configurable verifier (WEBHOOK_PROVIDER=hmac). With
// them, a sender of the four HMAC families works without code. Each states
// its default.
const (
	// HMACHeaderSetting names the header carrying the signature. Required.
	HMACHeaderSetting = "WEBHOOK_HMAC_HEADER"
	// HMACAlgorithmSetting is sha1, sha256 or sha512. Default sha256.
	HMACAlgorithmSetting = "WEBHOOK_HMAC_ALGORITHM"
	// HMACEncodingSetting is hex or base64. Default hex.
	HMACEncodingSetting = "WEBHOOK_HMAC_ENCODING"
	// HMACPrefixSetting precedes the encoded signature ("sha256=", "v0=").
	// Default none.
	HMACPrefixSetting = "WEBHOOK_HMAC_PREFIX"
	// HMACHeaderFormatSetting is the layout of the signature header:
	// "{signature}" (default) or a keyed list such as
	// "t={timestamp},v1={signature}" or "ts={timestamp};h1={signature}".
	HMACHeaderFormatSetting = "WEBHOOK_HMAC_HEADER_FORMAT"
	// HMACTimestampHeaderSetting names a header carrying the signed
	// timestamp, when the signature header does not. Default none.
	HMACTimestampHeaderSetting = "WEBHOOK_HMAC_TIMESTAMP_HEADER"
	// HMACTimestampFormatSetting is unix (seconds, the default), unix-ms or
	// rfc3339.
	HMACTimestampFormatSetting = "WEBHOOK_HMAC_TIMESTAMP_FORMAT"
	// HMACToleranceSetting (a Go duration) bounds the age of a signed
	// timestamp. Default 5m when a timestamp is signed; 0 checks none.
	HMACToleranceSetting = "WEBHOOK_HMAC_TOLERANCE"
	// HMACIDHeaderSetting names the header carrying a signed message id,
	// which the layout's {id} stands for. Default none.
	HMACIDHeaderSetting = "WEBHOOK_HMAC_ID_HEADER"
	// HMACLayoutSetting is the signed content, a template of literal text
	// and {body}, {timestamp}, {id}, {url}, {method}, {form}. Default {body};
	// {timestamp}.{body} with a timestamp; {id}.{timestamp}.{body} with an id
	// header too.
	HMACLayoutSetting = "WEBHOOK_HMAC_LAYOUT"
	// HMACEventIDSetting is where the deduplication key comes from: digest
	// (the default: a digest of the signed content), header (the signed id
	// header) or body:<dotted.path> (a field of the signed body).
	HMACEventIDSetting = "WEBHOOK_HMAC_EVENT_ID"
	// HMACEventTypeSetting is where the event type comes from:
	// body:<dotted.path> or header:<name> (reported as unsigned unless the
	// layout signs it). Default none.
	HMACEventTypeSetting = "WEBHOOK_HMAC_EVENT_TYPE"
	// HMACSecretFormatSetting is raw (the default: the secret's bytes are
	// the key) or whsec (base64 after an optional "whsec_", as Standard
	// Webhooks secrets are written).
	HMACSecretFormatSetting = "WEBHOOK_HMAC_SECRET_FORMAT"
	// HMACResultTTLSetting (a Go duration) is how long results are kept by
	// default; set it above the sender's last retry. Default 72h.
	HMACResultTTLSetting = "WEBHOOK_HMAC_RESULT_TTL"
)

// hmacDefaultResultTTL is the configurable verifier's default retention.
const hmacDefaultResultTTL = 72 * time.Hour

// HMACPresetFromEnv builds the configurable verifier's preset from the
// WEBHOOK_HMAC_* settings, read through getenv (os.Getenv in a function).
// A missing or malformed setting is a *setting.Error naming it.
func HMACPresetFromEnv(getenv func(string) string) (Preset, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	p := Preset{
		Name:            HMACPresetName,
		SignatureHeader: strings.ToLower(get(HMACHeaderSetting)),
		Prefix:          get(HMACPrefixSetting),
		HeaderFormat:    get(HMACHeaderFormatSetting),
		TimestampHeader: strings.ToLower(get(HMACTimestampHeaderSetting)),
		IDHeader:        strings.ToLower(get(HMACIDHeaderSetting)),
		Layout:          get(HMACLayoutSetting),
		ResultTTL:       hmacDefaultResultTTL,
	}
	if p.SignatureHeader == "" {
		return Preset{}, setting.Errorf(HMACHeaderSetting, "required with WEBHOOK_PROVIDER=hmac: the header carrying the signature")
	}
	var err error
	if p.Algorithm, err = settingOneOf(HMACAlgorithmSetting, get(HMACAlgorithmSetting), SHA256, SHA1, SHA256, SHA512); err != nil {
		return Preset{}, err
	}
	if p.Encoding, err = settingOneOf(HMACEncodingSetting, get(HMACEncodingSetting), Hex, Hex, Base64); err != nil {
		return Preset{}, err
	}
	if p.TimestampFormat, err = settingOneOf(HMACTimestampFormatSetting, get(HMACTimestampFormatSetting), UnixSeconds, UnixSeconds, UnixMilliseconds, RFC3339); err != nil {
		return Preset{}, err
	}
	secretFormat, err := settingOneOf(HMACSecretFormatSetting, get(HMACSecretFormatSetting), "raw", "raw", "whsec")
	if err != nil {
		return Preset{}, err
	}
	if secretFormat == "whsec" {
		p.SecretFormat = SecretWhsec
	}
	hf, err := schemeParseHeaderFormat(p.HeaderFormat)
	if err != nil {
		return Preset{}, setting.Errorf(HMACHeaderFormatSetting, "%v", err)
	}
	signsTimestamp := hf.timestampKey != "" || p.TimestampHeader != ""
	if hf.timestampKey != "" && p.TimestampHeader != "" {
		return Preset{}, setting.Errorf(HMACTimestampHeaderSetting, "the header format already carries the timestamp")
	}
	if p.Layout == "" {
		switch {
		case p.IDHeader != "" && signsTimestamp:
			p.Layout = "{id}.{timestamp}.{body}"
		case signsTimestamp:
			p.Layout = "{timestamp}.{body}"
		default:
			p.Layout = "{body}"
		}
	}
	layout, err := schemeParseLayout(p.Layout)
	if err != nil {
		return Preset{}, setting.Errorf(HMACLayoutSetting, "%v", err)
	}
	if schemeLayoutUses(layout, phTimestamp) && !signsTimestamp {
		return Preset{}, setting.Errorf(HMACLayoutSetting, "{timestamp} needs %s or a header format with {timestamp}", HMACTimestampHeaderSetting)
	}
	if signsTimestamp && !schemeLayoutUses(layout, phTimestamp) {
		return Preset{}, setting.Errorf(HMACLayoutSetting, "a timestamp is configured but the layout does not sign it: add {timestamp}")
	}
	if schemeLayoutUses(layout, phID) != (p.IDHeader != "") {
		return Preset{}, setting.Errorf(HMACLayoutSetting, "{id} and %s go together", HMACIDHeaderSetting)
	}
	switch {
	case schemeLayoutUses(layout, phURL):
		p.Family = FamilyURLHMAC
	case schemeLayoutUses(layout, phID):
		p.Family = FamilyMessageHMAC
	case schemeLayoutUses(layout, phTimestamp):
		p.Family = FamilyTimestampHMAC
	default:
		p.Family = FamilyBodyHMAC
	}
	if p.Tolerance, err = schemeDurationSetting(getenv, HMACToleranceSetting, 0); err != nil {
		return Preset{}, err
	}
	if get(HMACToleranceSetting) == "" && signsTimestamp {
		p.Tolerance = DefaultTolerance
	}
	if p.Tolerance > 0 && !signsTimestamp {
		return Preset{}, setting.Errorf(HMACToleranceSetting, "a tolerance needs a signed timestamp (%s or a header format with {timestamp})", HMACTimestampHeaderSetting)
	}
	if p.ResultTTL, err = schemeDurationSetting(getenv, HMACResultTTLSetting, hmacDefaultResultTTL); err != nil {
		return Preset{}, err
	}
	if p.ResultTTL <= 0 {
		return Preset{}, setting.Errorf(HMACResultTTLSetting, "must be positive")
	}
	switch id := get(HMACEventIDSetting); {
	case id == "" || id == "digest":
	case id == "header":
		if p.IDHeader == "" {
			return Preset{}, setting.Errorf(HMACEventIDSetting, "header needs %s, signed through {id}", HMACIDHeaderSetting)
		}
		p.EventID.Header = p.IDHeader
	case strings.HasPrefix(id, "body:") && len(id) > len("body:"):
		p.EventID.Field = strings.TrimPrefix(id, "body:")
	default:
		return Preset{}, setting.Errorf(HMACEventIDSetting, "want digest, header or body:<dotted.path>")
	}
	switch typ := get(HMACEventTypeSetting); {
	case typ == "":
	case strings.HasPrefix(typ, "body:") && len(typ) > len("body:"):
		p.EventType.Field = strings.TrimPrefix(typ, "body:")
	case strings.HasPrefix(typ, "header:") && len(typ) > len("header:"):
		p.EventType.Header = strings.ToLower(strings.TrimPrefix(typ, "header:"))
	default:
		return Preset{}, setting.Errorf(HMACEventTypeSetting, "want body:<dotted.path> or header:<name>")
	}
	p.Retries = "configured: " + HMACResultTTLSetting
	if err := p.validate(); err != nil {
		return Preset{}, setting.Errorf(HMACLayoutSetting, "%v", err)
	}
	return p, nil
}

// settingOneOf reads an enumerated setting: def when empty, else one of allowed.
func settingOneOf[T ~string](name, value string, def T, allowed ...T) (T, error) {
	if value == "" {
		return def, nil
	}
	v := T(strings.ToLower(value))
	if !slices.Contains(allowed, v) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		return def, setting.Errorf(name, "%q is not one of %s", value, strings.Join(names, ", "))
	}
	return v, nil
}

// schemeDurationSetting reads a Go duration setting; def when empty.
func schemeDurationSetting(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	raw := strings.TrimSpace(getenv(name))
	if raw == "" {
		return def, nil
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
