package webhook

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemlambda/idem/internal/preset"
)

// HMACConfig describes a sender of the HMAC families that has no preset, for
// NewHMAC: an HMAC over the body, over a timestamp and the body, over a
// message id, a timestamp and the body, or over the public URL. Each field
// states its default; header names are case-insensitive.
type HMACConfig struct {
	// Header names the header carrying the signature. Required.
	Header string
	// Algorithm is sha1, sha256 or sha512. Default sha256.
	Algorithm string
	// Encoding is how the signature is written: hex or base64. Default hex.
	Encoding string
	// Prefix precedes the encoded signature ("sha256=", "v0="). Default none.
	Prefix string
	// HeaderFormat is the layout of the signature header: "{signature}"
	// (the default) or a keyed list such as "t={timestamp},v1={signature}"
	// or "ts={timestamp};h1={signature}".
	HeaderFormat string
	// TimestampHeader names a header carrying the signed timestamp, when
	// the signature header does not. Default none.
	TimestampHeader string
	// TimestampFormat is unix (seconds, the default), unix-ms or rfc3339.
	TimestampFormat string
	// Tolerance bounds the distance of a signed timestamp from the
	// receiver's clock. Default DefaultTolerance when a timestamp is signed;
	// it must be below ResultTTL, or a delivery replayed after its result
	// expired would still verify.
	Tolerance time.Duration
	// IDHeader names the header carrying a signed message id, which the
	// layout's {id} stands for. Default none.
	IDHeader string
	// Layout is the signed content: literal text and the placeholders
	// {body}, {timestamp}, {id}, {url}, {method} and {form} (a form body's
	// parameters sorted by name, each followed by its value). Default {body};
	// {timestamp}.{body} with a timestamp; {id}.{timestamp}.{body} with an
	// ID header too.
	Layout string
	// EventID is where the deduplication key comes from: digest (the
	// default: a digest of the signed content), header (the signed ID
	// header) or body:<dotted.path> (a member of the signed body).
	EventID string
	// EventType is where the event type comes from: body:<dotted.path> or
	// header:<name> (reported unsigned unless the layout signs it). Default
	// none.
	EventType string
	// SecretFormat is raw (the default: the secret's bytes are the key) or
	// whsec (base64 after an optional "whsec_", as Standard Webhooks secrets
	// are written).
	SecretFormat string
	// ResultTTL is how long a completed result should be kept: longer than
	// the sender's last retry. Default 72h.
	ResultTTL time.Duration
}

// ConfigError reports the field of an HMACConfig that NewHMAC cannot use.
type ConfigError struct {
	// Field is the HMACConfig field at fault, e.g. "Layout".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error returns "webhook: hmac config Field: reason".
func (e *ConfigError) Error() string { return "webhook: hmac config " + e.Field + ": " + e.Reason }

// hmacDefaultResultTTL is HMACConfig.ResultTTL's default.
const hmacDefaultResultTTL = 72 * time.Hour

// NewHMAC returns the configurable verifier ("hmac") for the sender cfg
// describes, accepting a delivery signed with any of secrets. A field it
// cannot use is a *ConfigError naming it; the secrets' errors are New's.
func NewHMAC(cfg HMACConfig, secrets []string) (*Verifier, error) {
	p, err := hmacPreset(cfg)
	if err != nil {
		return nil, err
	}
	return newVerifier(p, secrets, 0)
}

// configErr is a *ConfigError for field.
func configErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// hmacPreset builds and checks the preset cfg describes.
func hmacPreset(cfg HMACConfig) (preset.Preset, error) {
	p := preset.Preset{
		Name:            preset.HMACName,
		SignatureHeader: strings.ToLower(strings.TrimSpace(cfg.Header)),
		Prefix:          cfg.Prefix,
		HeaderFormat:    cfg.HeaderFormat,
		TimestampHeader: strings.ToLower(strings.TrimSpace(cfg.TimestampHeader)),
		IDHeader:        strings.ToLower(strings.TrimSpace(cfg.IDHeader)),
		Layout:          cfg.Layout,
		ResultTTL:       cmp.Or(cfg.ResultTTL, hmacDefaultResultTTL),
		Retries:         "configured: HMACConfig.ResultTTL",
	}
	if p.SignatureHeader == "" {
		return p, configErr("Header", "required: the header carrying the signature")
	}
	if err := hmacEnums(cfg, &p); err != nil {
		return p, err
	}
	hf, err := parseHeaderFormat(p.HeaderFormat)
	if err != nil {
		return p, configErr("HeaderFormat", "%v", err)
	}
	signsTimestamp := hf.timestampKey != "" || p.TimestampHeader != ""
	if hf.timestampKey != "" && p.TimestampHeader != "" {
		return p, configErr("TimestampHeader", "the header format already carries the timestamp")
	}
	if err := hmacLayout(&p, signsTimestamp); err != nil {
		return p, err
	}
	if err := hmacWindow(cfg, &p, signsTimestamp); err != nil {
		return p, err
	}
	if err := hmacSources(cfg, &p); err != nil {
		return p, err
	}
	if err := validatePreset(p); err != nil {
		return p, configErr("Layout", "%v", err)
	}
	return p, nil
}

// hmacEnums reads the enumerated fields of cfg into p.
func hmacEnums(cfg HMACConfig, p *preset.Preset) error {
	var err error
	if p.Algorithm, err = oneOf("Algorithm", cfg.Algorithm, preset.SHA256, preset.SHA1, preset.SHA256, preset.SHA512); err != nil {
		return err
	}
	if p.Encoding, err = oneOf("Encoding", cfg.Encoding, preset.Hex, preset.Hex, preset.Base64); err != nil {
		return err
	}
	if p.TimestampFormat, err = oneOf("TimestampFormat", cfg.TimestampFormat, preset.UnixSeconds, preset.UnixSeconds, preset.UnixMilliseconds, preset.RFC3339); err != nil {
		return err
	}
	format, err := oneOf("SecretFormat", cfg.SecretFormat, "raw", "raw", "whsec")
	if format == "whsec" {
		p.SecretFormat = preset.SecretWhsec
	}
	return err
}

// hmacLayout completes and checks the layout, and sets the family it implies.
func hmacLayout(p *preset.Preset, signsTimestamp bool) error {
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
	layout, err := parseLayout(p.Layout)
	switch {
	case err != nil:
		return configErr("Layout", "%v", err)
	case layoutUses(layout, phTimestamp) && !signsTimestamp:
		return configErr("Layout", "{timestamp} needs TimestampHeader or a header format with {timestamp}")
	case signsTimestamp && !layoutUses(layout, phTimestamp):
		return configErr("Layout", "a timestamp is configured but the layout does not sign it: add {timestamp}")
	case layoutUses(layout, phID) != (p.IDHeader != ""):
		return configErr("Layout", "{id} and IDHeader go together")
	case layoutUses(layout, phURL):
		p.Family = preset.FamilyURLHMAC
	case layoutUses(layout, phID):
		p.Family = preset.FamilyMessageHMAC
	case layoutUses(layout, phTimestamp):
		p.Family = preset.FamilyTimestampHMAC
	default:
		p.Family = preset.FamilyBodyHMAC
	}
	return nil
}

// hmacWindow sets the tolerance and checks it against the retention.
func hmacWindow(cfg HMACConfig, p *preset.Preset, signsTimestamp bool) error {
	switch {
	case cfg.Tolerance < 0:
		return configErr("Tolerance", "must not be negative")
	case cfg.ResultTTL < 0:
		return configErr("ResultTTL", "must not be negative")
	case cfg.Tolerance > 0 && !signsTimestamp:
		return configErr("Tolerance", "a tolerance needs a signed timestamp (TimestampHeader or a header format with {timestamp})")
	case signsTimestamp:
		p.Tolerance = cmp.Or(cfg.Tolerance, DefaultTolerance)
	}
	if p.Tolerance >= p.ResultTTL {
		return configErr("Tolerance", "%s is not below the retention (ResultTTL %s): a delivery replayed after its result expired would still verify", p.Tolerance, p.ResultTTL)
	}
	return nil
}

// hmacSources reads where the event id and type come from.
func hmacSources(cfg HMACConfig, p *preset.Preset) error {
	switch id := strings.TrimSpace(cfg.EventID); {
	case id == "" || id == "digest":
	case id == "header":
		if p.IDHeader == "" {
			return configErr("EventID", "header needs IDHeader, signed through {id}")
		}
		p.EventID.Header = p.IDHeader
	case strings.HasPrefix(id, "body:") && len(id) > len("body:"):
		p.EventID.Field = strings.TrimPrefix(id, "body:")
	default:
		return configErr("EventID", "want digest, header or body:<dotted.path>")
	}
	switch typ := strings.TrimSpace(cfg.EventType); {
	case typ == "":
	case strings.HasPrefix(typ, "body:") && len(typ) > len("body:"):
		p.EventType.Field = strings.TrimPrefix(typ, "body:")
	case strings.HasPrefix(typ, "header:") && len(typ) > len("header:"):
		p.EventType.Header = strings.ToLower(strings.TrimPrefix(typ, "header:"))
	default:
		return configErr("EventType", "want body:<dotted.path> or header:<name>")
	}
	return nil
}

// oneOf reads an enumerated field: def when empty, else one of allowed.
func oneOf[T ~string](field, value string, def T, allowed ...T) (T, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return def, nil
	}
	v := T(strings.ToLower(value))
	if !slices.Contains(allowed, v) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		return def, configErr(field, "%q is not one of %s", value, strings.Join(names, ", "))
	}
	return v, nil
}
