package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/webhook"
)

// Environment variables read by New. The Redis settings (REDIS_*) are those of
// redisconn.SettingsFromEnv, the idempotency settings (IDEM_*) those of config.IdemOptions,
// and the sink settings (WEBHOOK_SINK, WEBHOOK_QUEUE_URL, WEBHOOK_EVENT_BUS, ...) those of
// sink.FromEnv; LOG_LEVEL is obs.EnvLogLevel.
const (
	// EnvProvider names the sender: one of webhook.Names (stripe, github, shopify, standard,
	// slack, twilio, discord, ...) or config.HMACProvider with the WEBHOOK_HMAC_* settings
	// (config.HMACFromEnv). Required. The function answers POST /webhooks/<EnvProvider>.
	EnvProvider = "WEBHOOK_PROVIDER"
	// EnvSecret is the signing secret, or a comma-separated list of secrets that are all
	// accepted (for a rotation). Surrounding spaces are trimmed and empty entries skipped, so
	// a secret cannot itself contain a comma.
	EnvSecret = "WEBHOOK_SECRET"
	// EnvSecretARN is the ARN (or name) of a Secrets Manager secret whose string holds the
	// signing secret, or a comma-separated list, as EnvSecret does. It is read once, by New,
	// through a client that honours AWS_ENDPOINT_URL_SECRETS_MANAGER.
	EnvSecretARN = "WEBHOOK_SECRET_ARN"
	// EnvTolerance overrides how far a signed timestamp may lie from the function's clock,
	// as a positive Go duration such as 5m, below the provider's retention. Default: the
	// provider's (webhook.DefaultTolerance, 300s, for Stripe, Slack and Standard Webhooks). Senders that sign no timestamp (GitHub,
	// Shopify, ...) ignore it.
	EnvTolerance = "WEBHOOK_TOLERANCE"
	// EnvMaxBody is the largest request body accepted, in bytes, after base64 decoding.
	// Default and maximum MaxBodyLimit (6 MiB); see defaultBodyLimit.
	EnvMaxBody = "WEBHOOK_MAX_BODY"
	// EnvFunctionName is set by Lambda; it becomes the function attribute of every log line.
	// Outside Lambda the function is called webhook-<provider>.
	EnvFunctionName = "AWS_LAMBDA_FUNCTION_NAME"
	// EnvSAMLocal is set to "true" by sam local invoke and sam local start-api. Inside
	// Lambda a development secret (DevSecret) is refused at init unless it is set, so that
	// events/env.json works under sam local and the published secrets never work in a
	// deployment.
	EnvSAMLocal = "AWS_SAM_LOCAL"
)

// MaxBodyLimit is the largest value EnvMaxBody accepts: 6 MiB, the payload limit of a
// synchronous Lambda invocation, which no larger body can pass anyway.
const MaxBodyLimit = 6 << 20

// SecretReadTimeout bounds the Secrets Manager call New makes for EnvSecretARN, retries
// included, so a broken endpoint fails init instead of holding it until Lambda's timeout.
const SecretReadTimeout = 5 * time.Second

// settings are the function's own variables, parsed and checked before anything is built.
type settings struct {
	provider     string
	devPreset    preset.Preset // what refuseDevSecrets compares secrets as
	publicURL    string        // config.PublicURLSetting
	secrets      []string      // from EnvSecret
	secretARN    string
	tolerance    time.Duration // 0: the provider's default
	maxBody      int
	level        slog.Level
	function     string
	insideLambda bool
	samLocal     bool // EnvSAMLocal is "true"
}

// readSettings reads and checks the function's variables. With secretsGiven (WithSecrets)
// neither secret variable is needed.
func readSettings(getenv func(string) string, secretsGiven bool) (settings, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	s := settings{
		provider:     get(EnvProvider),
		secretARN:    get(EnvSecretARN),
		maxBody:      defaultBodyLimit,
		insideLambda: get(redisconn.EnvRuntimeAPI) != "",
		samLocal:     strings.EqualFold(get(EnvSAMLocal), "true"),
	}
	providers := strings.Join(slices.Sorted(slices.Values(append(webhook.Names(), config.HMACProvider))), ", ")
	switch {
	case s.provider == "":
		return s, &setting.Error{Var: EnvProvider, Reason: "required: one of " + providers}
	case s.provider != config.HMACProvider && !slices.Contains(webhook.Names(), s.provider):
		return s, setting.Errorf(EnvProvider, "%q is not one of %s", s.provider, providers)
	}
	var err error
	if s.devPreset, err = devPreset(s.provider, getenv); err != nil {
		return s, err // a *setting.Error naming the WEBHOOK_HMAC_* variable
	}
	if s.publicURL, err = config.PublicURLFromEnv(getenv); err != nil {
		return s, err
	}

	if err := s.readSecrets(getenv, secretsGiven); err != nil {
		return s, err
	}
	if err := s.readLimits(get); err != nil {
		return s, err
	}
	if s.level, err = obs.LevelFromEnv(getenv); err != nil {
		return s, err
	}
	s.function = get(EnvFunctionName)
	if s.function == "" {
		s.function = "webhook-" + s.provider
	}
	return s, nil
}

// readSecrets reads EnvSecret, checked against EnvSecretARN. With secretsGiven (WithSecrets)
// neither is needed.
func (s *settings) readSecrets(getenv func(string) string, secretsGiven bool) error {
	raw := getenv(EnvSecret)
	s.secrets = splitSecrets(raw)
	switch {
	case secretsGiven:
		s.secrets, s.secretARN = nil, ""
	case strings.TrimSpace(raw) != "" && len(s.secrets) == 0:
		return &setting.Error{Var: EnvSecret, Reason: "holds no secret, only commas and spaces"}
	case len(s.secrets) > 0 && s.secretARN != "":
		return &setting.Error{Var: EnvSecret, Reason: "conflicts with " + EnvSecretARN + "; set one of them"}
	case len(s.secrets) == 0 && s.secretARN == "" && s.insideLambda:
		return &setting.Error{Var: EnvSecret, Reason: "required inside Lambda (" + redisconn.EnvRuntimeAPI + " is set): set it or " + EnvSecretARN}
	}
	return nil
}

// readLimits reads EnvTolerance and EnvMaxBody.
func (s *settings) readLimits(get func(string) string) error {
	if v := get(EnvTolerance); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return setting.Errorf(EnvTolerance, "%q is not a positive Go duration such as 5m or 300s", v)
		}
		s.tolerance = d
	}
	if v := get(EnvMaxBody); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxBodyLimit {
			return setting.Errorf(EnvMaxBody, "%q is not a number of bytes from 1 to %d", v, MaxBodyLimit)
		}
		s.maxBody = n
	}
	return nil
}

// splitSecrets splits a comma-separated list, trimming spaces and skipping empty entries (a
// trailing comma, or the newline a secret stored from a file ends with).
func splitSecrets(list string) []string {
	var out []string
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// readSecret reads the signing secrets from the Secrets Manager secret arn. Errors are
// *setting.Error naming EnvSecretARN and never contain the secret.
func readSecret(ctx context.Context, client redisconn.SecretsClient, arn string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, SecretReadTimeout)
	defer cancel()
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", &setting.Error{Var: EnvSecretARN, Reason: "cannot read the secret"}, err)
	}
	raw := string(out.SecretBinary)
	if out.SecretString != nil {
		raw = *out.SecretString
	}
	raw = strings.TrimSpace(raw)
	// The console's default "key/value" secret is JSON; used as an HMAC key it would make
	// every delivery fail verification, so it is refused here, where the cause is clear.
	if strings.HasPrefix(raw, "{") {
		return nil, &setting.Error{Var: EnvSecretARN, Reason: "the secret is JSON; store the signing secret as plain text (or a comma-separated list)"}
	}
	secrets := splitSecrets(raw)
	if len(secrets) == 0 {
		return nil, &setting.Error{Var: EnvSecretARN, Reason: "the secret is empty"}
	}
	return secrets, nil
}

// refuseDevSecrets returns a *setting.Error naming variable when, inside Lambda and not under
// sam local, one of secrets is a development secret: webhook.DevSecret of any sender, or for a
// Standard Webhooks secret any encoding of the same key. Those secrets
// are published, so a deployed function accepting one would run the work of anyone who reads
// the README.
func refuseDevSecrets(s settings, secrets []string, variable string) error {
	if !s.insideLambda || s.samLocal {
		return nil
	}
	for i, secret := range secrets {
		if p, ok := preset.IsDevSecret(s.devPreset, secret); ok {
			return setting.Errorf(variable, "secret %d of %d is the published development secret of the %s provider; "+
				"inside Lambda (%s is set) only a real signing secret is accepted, except under sam local (%s=true)",
				i+1, len(secrets), p, redisconn.EnvRuntimeAPI, EnvSAMLocal)
		}
	}
	return nil
}

// devPreset returns provider's preset, as far as telling a development secret needs it; for
// the configurable verifier, its settings are checked here, so that a bad one is reported
// before anything else is read.
func devPreset(provider string, getenv func(string) string) (preset.Preset, error) {
	if provider != config.HMACProvider {
		p, _ := preset.Lookup(provider)
		return p, nil
	}
	if _, err := config.NewVerifier(provider, []string{"settings-check"}, 0, getenv); err != nil {
		return preset.Preset{}, err
	}
	p := preset.Preset{Name: provider}
	if strings.EqualFold(strings.TrimSpace(getenv(config.HMACSecretFormatSetting)), "whsec") {
		p.SecretFormat = preset.SecretWhsec
	}
	return p, nil
}

// providerError names the variable behind an error from webhook.New.
func providerError(err error, secretVar string) error {
	var named *setting.Error
	switch {
	case errors.As(err, &named): // a WEBHOOK_HMAC_* setting, named by config
		return err
	case errors.Is(err, webhook.ErrUnknownProvider):
		return fmt.Errorf("%w: %w", &setting.Error{Var: EnvProvider, Reason: "unknown provider"}, err)
	case errors.Is(err, webhook.ErrInvalidTolerance):
		return fmt.Errorf("%w: %w", &setting.Error{Var: EnvTolerance, Reason: "rejected by the provider"}, err)
	default:
		return fmt.Errorf("%w: %w", &setting.Error{Var: secretVar, Reason: "not a usable signing secret"}, err)
	}
}
