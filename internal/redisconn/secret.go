package redisconn

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/idemlambda/idem/internal/setting"
)

// SecretsClient is the part of the Secrets Manager client that Open uses;
// *secretsmanager.Client implements it.
type SecretsClient interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SecretReadTimeout bounds the Secrets Manager call Open makes, retries included, so a
// broken endpoint cannot hold the function's init until Lambda's init timeout.
const SecretReadTimeout = 5 * time.Second

// readAuthSecret reads the Redis password (and optionally username) from the secret id.
// Errors are *setting.Error naming REDIS_AUTH_SECRET_ARN; they never contain the secret.
func readAuthSecret(ctx context.Context, client SecretsClient, id string) (username, password string, err error) {
	ctx, cancel := context.WithTimeout(ctx, SecretReadTimeout)
	defer cancel()
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &id})
	if err != nil {
		return "", "", settingError(EnvAuthSecretARN, "cannot read the secret", err)
	}
	var raw string
	switch {
	case out.SecretString != nil:
		raw = *out.SecretString
	default:
		raw = string(out.SecretBinary)
	}
	return parseAuthSecret(raw)
}

// parseAuthSecret accepts a plain password or JSON {"password": ..., "username": ...}.
// Surrounding white space is trimmed: a secret stored from a file usually ends in a newline
// that is not part of the password.
func parseAuthSecret(raw string) (username, password string, err error) {
	raw = strings.TrimSpace(raw)
	if !strings.HasPrefix(raw, "{") {
		if raw == "" {
			return "", "", &setting.Error{Var: EnvAuthSecretARN, Reason: "the secret is empty"}
		}
		return "", raw, nil
	}
	var v struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		// json's syntax errors quote bytes of the input, so only the field name is kept.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return "", "", setting.Errorf(EnvAuthSecretARN, "the secret's %q is not a string", te.Field)
		}
		return "", "", &setting.Error{Var: EnvAuthSecretARN, Reason: "the secret starts with '{' but is not valid JSON"}
	}
	if v.Password == "" {
		return "", "", &setting.Error{Var: EnvAuthSecretARN, Reason: `the secret's JSON has no "password"`}
	}
	return v.Username, v.Password, nil
}
