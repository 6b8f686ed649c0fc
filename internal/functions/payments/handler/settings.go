package handler

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	idemconfig "github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/idem"
)

// Environment variables read by New, besides REDIS_*, IDEM_* and LOG_LEVEL (docs/configuration.md).
const (
	// EnvLedger picks the ledger: "dynamodb" or "memory". Default "dynamodb" inside Lambda
	// (AWS_LAMBDA_RUNTIME_API set) and "memory" outside; inside Lambda "memory" is used only when
	// set explicitly, since every execution environment would have its own.
	EnvLedger = "PAYMENTS_LEDGER"
	// EnvTable names the DynamoDB table of the ledger. Required with PAYMENTS_LEDGER=dynamodb.
	EnvTable = "PAYMENTS_TABLE"
	// EnvMaxAmount is the largest amount accepted, in minor units: a positive integer no larger
	// than MaxSafeAmount. Default DefaultMaxAmount.
	EnvMaxAmount = "PAYMENTS_MAX_AMOUNT"
	// EnvAuth says where the caller's principal comes from: AuthIAM, AuthJWT, AuthLambda or
	// AuthNone. Required inside Lambda (an unset or unknown value fails init); outside Lambda
	// unset means AuthNone, so tests and local runs need no authorizer.
	EnvAuth = "PAYMENTS_AUTH"
	// EnvDynamoDBEndpoint overrides the DynamoDB endpoint, the standard SDK way (local servers,
	// tests). Default unset: the regional endpoint.
	EnvDynamoDBEndpoint = "AWS_ENDPOINT_URL_DYNAMODB"
)

// Ledger names accepted in PAYMENTS_LEDGER.
const (
	LedgerDynamoDB = "dynamodb"
	LedgerMemory   = "memory"
)

// Authorization modes accepted in PAYMENTS_AUTH: the authorizer API Gateway runs on the
// payments routes, and so where principalOf finds the caller.
const (
	// AuthIAM: the routes use AWS_IAM authorization; the principal is the caller's IAM
	// identity (requestContext.authorizer.iam: userArn, else callerId). The template's default.
	AuthIAM = "iam"
	// AuthJWT: a JWT authorizer; the principal is the token's sub claim.
	AuthJWT = "jwt"
	// AuthLambda: a Lambda authorizer; the principal is the string principalId of its context.
	AuthLambda = "lambda"
	// AuthNone: no authorizer, an explicit opt-in: every caller is the one principal Anonymous,
	// so callers share idempotency keys and can read each other's payments.
	AuthNone = "none"
)

// Defaults and fixed limits.
const (
	// DefaultResultTTL is how long a created payment's response is replayed from Redis, unless
	// IDEM_RESULT_TTL says otherwise. After it, a retry is still answered with the same payment,
	// from the ledger.
	DefaultResultTTL = 24 * time.Hour
	// DefaultMaxAmount is the default of PAYMENTS_MAX_AMOUNT: 999,999.99 in a currency with two
	// minor digits.
	DefaultMaxAmount = 99_999_999
	// MaxSafeAmount is the largest PAYMENTS_MAX_AMOUNT accepted: 2^53-1, the largest integer a
	// JavaScript client reads back exactly.
	MaxSafeAmount = 1<<53 - 1
	// MaxBodyBytes is the largest request body accepted; a larger one is answered with 413.
	MaxBodyBytes = 64 << 10
)

// envRuntimeAPI is set by Lambda and the Runtime Interface Emulator: its presence means
// "inside Lambda".
const envRuntimeAPI = "AWS_LAMBDA_RUNTIME_API"

// settings are the function's own environment settings.
type settings struct {
	insideLambda bool
	auth         string // AuthIAM, AuthJWT, AuthLambda or AuthNone
	ledger       string // LedgerDynamoDB or LedgerMemory
	table        string
	maxAmount    int64
}

// readSettings reads PAYMENTS_*; the ledger choice only when needLedger (no WithLedger).
func readSettings(getenv func(string) string, needLedger bool) (settings, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	s := settings{insideLambda: get(envRuntimeAPI) != "", maxAmount: DefaultMaxAmount}
	if v := get(EnvMaxAmount); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxSafeAmount {
			return settings{}, setting.Errorf(EnvMaxAmount, "%q is not an integer from 1 to %d (minor units)", v, int64(MaxSafeAmount))
		}
		s.maxAmount = n
	}
	auth, err := authFromEnv(get(EnvAuth), s.insideLambda)
	if err != nil {
		return settings{}, err
	}
	s.auth = auth
	if !needLedger {
		return s, nil
	}
	s.ledger = strings.ToLower(get(EnvLedger))
	explicit := s.ledger != ""
	if !explicit {
		s.ledger = LedgerMemory
		if s.insideLambda {
			s.ledger = LedgerDynamoDB
		}
	}
	switch s.ledger {
	case LedgerMemory:
	case LedgerDynamoDB:
		s.table = get(EnvTable)
		if s.table == "" {
			reason := "required with " + EnvLedger + "=" + LedgerDynamoDB
			if !explicit {
				reason += " (the default inside Lambda; set " + EnvLedger + "=" + LedgerMemory + " explicitly for a test ledger)"
			}
			return settings{}, &setting.Error{Var: EnvTable, Reason: reason}
		}
	default:
		return settings{}, setting.Errorf(EnvLedger, "%q is not one of %s, %s", getenv(EnvLedger), LedgerDynamoDB, LedgerMemory)
	}
	return s, nil
}

// authFromEnv reads PAYMENTS_AUTH. Inside Lambda it has no default: a function deployed without
// it must not silently serve every caller as one principal.
func authFromEnv(v string, insideLambda bool) (string, error) {
	switch mode := strings.ToLower(v); mode {
	case AuthIAM, AuthJWT, AuthLambda, AuthNone:
		return mode, nil
	case "":
		if !insideLambda {
			return AuthNone, nil
		}
		return "", &setting.Error{Var: EnvAuth, Reason: "required inside Lambda: one of " + authModes +
			" (" + AuthNone + " lets every caller share one principal)"}
	default:
		return "", &setting.Error{Var: EnvAuth, Reason: fmt.Sprintf("%q is not one of %s", v, authModes)}
	}
}

const authModes = AuthIAM + ", " + AuthJWT + ", " + AuthLambda + ", " + AuthNone

// guardOptionsFromEnv reads the core's settings; its *setting.Error names the variable at fault.
func guardOptionsFromEnv(getenv func(string) string) ([]idem.Option, error) {
	opts, err := idemconfig.IdemOptions(getenv, DefaultResultTTL)
	if err != nil {
		return nil, fmt.Errorf("payments: %w", err)
	}
	return opts, nil
}

// awsConfigFromEnv loads the AWS SDK configuration the standard way (config.LoadDefaultConfig),
// with the region and static credentials taken from getenv when it sets them, so that getenv is
// the one source of every documented variable (in Lambda it is os.Getenv, and nothing changes).
func awsConfigFromEnv(ctx context.Context, getenv func(string) string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	region := strings.TrimSpace(getenv("AWS_REGION"))
	if region == "" {
		region = strings.TrimSpace(getenv("AWS_DEFAULT_REGION"))
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(id, secret, getenv("AWS_SESSION_TOKEN"))))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("payments: load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, &setting.Error{Var: "AWS_REGION", Reason: "required with " + EnvLedger + "=" + LedgerDynamoDB}
	}
	return cfg, nil
}

// dynamoLedgerFromEnv builds the DynamoDB ledger on table, honouring AWS_ENDPOINT_URL_DYNAMODB.
func dynamoLedgerFromEnv(cfg aws.Config, getenv func(string) string, table string) (*ledger.DynamoDB, error) {
	endpoint := strings.TrimSpace(getenv(EnvDynamoDBEndpoint))
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &setting.Error{Var: EnvDynamoDBEndpoint, Reason: "must be an http:// or https:// URL"}
		}
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	return ledger.NewDynamoDB(client, table), nil
}
