package redisconn

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/setting"
)

// Environment variables read by SettingsFromEnv.
const (
	// EnvURL is the redis:// or rediss:// URL of the endpoint. Required.
	EnvURL = "REDIS_URL"
	// EnvCluster set to true selects the cluster client. Default false.
	EnvCluster = "REDIS_CLUSTER"
	// EnvAuthSecretARN names the Secrets Manager secret holding the password. Default unset.
	EnvAuthSecretARN = "REDIS_AUTH_SECRET_ARN"
	// EnvIAMAuth set to true authenticates with ElastiCache IAM auth tokens. Default false.
	EnvIAMAuth = "REDIS_IAM_AUTH"
	// EnvCacheName is the replication group id or serverless cache name that IAM auth tokens
	// are signed for. Required with EnvIAMAuth.
	EnvCacheName = "REDIS_CACHE_NAME"
	// EnvServerless set to true marks the cache as ElastiCache Serverless for IAM auth tokens.
	// Default false.
	EnvServerless = "REDIS_CACHE_SERVERLESS"
	// EnvMaxConcurrency is set by Lambda when one execution environment may run several
	// invocations at once. Default unset: one invocation at a time.
	EnvMaxConcurrency = "AWS_LAMBDA_MAX_CONCURRENCY"
	// EnvRuntimeAPI is set by Lambda (and the Runtime Interface Emulator); its presence means
	// "inside Lambda". This package does not read it; the functions do.
	EnvRuntimeAPI = "AWS_LAMBDA_RUNTIME_API"
	// EnvRegion is the AWS region IAM auth tokens are signed for; Lambda sets it.
	EnvRegion = "AWS_REGION"
)

// Settings are the Redis settings (the REDIS_* variables), read from the environment by
// SettingsFromEnv or filled in by hand (Open validates them either way).
type Settings struct {
	// URL is REDIS_URL: redis:// or rediss:// (TLS). A username and password in the URL are
	// used for AUTH; go-redis query parameters (read_timeout, pool_size, ...) override this
	// package's defaults. Required: this package never starts a server (the local API starts
	// its embedded Redis itself and hands its client to the handlers).
	URL string
	// Cluster is REDIS_CLUSTER=true: use the cluster client (ElastiCache cluster mode or
	// Serverless). URL is then the configuration endpoint, and further seed nodes may be
	// added with addr= query parameters.
	Cluster bool
	// AuthSecretARN is REDIS_AUTH_SECRET_ARN: the ARN (or name) of a Secrets Manager secret
	// holding the password, either as the plain secret string or as JSON
	// {"password": "...", "username": "..."} (username optional; when present it replaces the
	// URL's username). Read once, by Open.
	AuthSecretARN string
	// IAMAuth is REDIS_IAM_AUTH=true: authenticate each new connection with an ElastiCache
	// IAM auth token for the URL's username (the ElastiCache user id). Needs a rediss:// URL
	// and CacheName.
	IAMAuth bool
	// CacheName is REDIS_CACHE_NAME: the replication group id, or the serverless cache name,
	// that IAM auth tokens are signed for.
	CacheName string
	// Serverless is REDIS_CACHE_SERVERLESS=true: the cache is ElastiCache Serverless, which
	// IAM auth tokens must say (ResourceType=ServerlessCache).
	Serverless bool
	// MaxConcurrency is AWS_LAMBDA_MAX_CONCURRENCY, 0 when unset. The connection pool holds
	// max(MaxConcurrency, DefaultPoolSize) connections.
	MaxConcurrency int
}

// settingError returns a *setting.Error for the variable name. A cause is wrapped after it, so
// errors.As finds the variable and errors.Is the cause; reasons never repeat a value, since
// REDIS_URL may carry a password.
func settingError(name, reason string, cause error) error {
	se := &setting.Error{Var: name, Reason: reason}
	if cause == nil {
		return se
	}
	return fmt.Errorf("%w: %w", se, cause)
}

// SettingsFromEnv reads the Redis settings through getenv (os.Getenv in production) and
// validates them as Settings.Validate does. Values are trimmed of surrounding white space.
// Booleans accept the forms of strconv.ParseBool and default to false; a malformed value, a
// missing REDIS_URL, or settings that contradict each other return a *setting.Error naming the
// variable.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	var s Settings
	var err error
	s.URL = get(EnvURL)
	s.AuthSecretARN = get(EnvAuthSecretARN)
	s.CacheName = get(EnvCacheName)
	if s.Cluster, err = envBool(EnvCluster, get(EnvCluster)); err != nil {
		return Settings{}, err
	}
	if s.IAMAuth, err = envBool(EnvIAMAuth, get(EnvIAMAuth)); err != nil {
		return Settings{}, err
	}
	if s.Serverless, err = envBool(EnvServerless, get(EnvServerless)); err != nil {
		return Settings{}, err
	}
	if v := get(EnvMaxConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Settings{}, setting.Errorf(EnvMaxConcurrency, "%q is not a positive integer", v)
		}
		s.MaxConcurrency = n
	}
	if err := s.Validate(); err != nil {
		return Settings{}, err
	}
	return s, nil
}

func envBool(name, v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, setting.Errorf(name, "%q is not a boolean (true or false)", v)
	}
	return b, nil
}

// Validate checks the settings without touching the network and returns a *setting.Error
// for the first problem:
//   - URL empty;
//   - URL not a redis:// or rediss:// URL with a host, or rejected by go-redis's parser;
//     in cluster mode, a database other than 0;
//   - AuthSecretARN or IAMAuth together with a password in the URL, or with each other;
//   - IAMAuth without a rediss:// URL, without a username in the URL, or without CacheName;
//   - MaxConcurrency below 0.
func (s Settings) Validate() error {
	if s.MaxConcurrency < 0 {
		return &setting.Error{Var: EnvMaxConcurrency, Reason: "must not be negative"}
	}
	if s.URL == "" {
		return &setting.Error{Var: EnvURL, Reason: "required: the redis:// or rediss:// URL of the Redis endpoint (only the local API, make run, starts an embedded Redis without it)"}
	}
	u, err := s.parsedURL()
	if err != nil {
		return err
	}
	if err := s.checkAuth(u); err != nil {
		return err
	}
	if _, _, err := s.redisOptions(); err != nil {
		return err
	}
	return nil
}

// checkAuth checks that at most one source of credentials is set (AuthSecretARN, IAMAuth,
// a password in URL) and that IAMAuth has what ElastiCache needs: TLS, a user id and CacheName.
func (s Settings) checkAuth(u *url.URL) error {
	var urlUser string
	var urlHasPassword bool
	if u.User != nil {
		urlUser = u.User.Username()
		_, urlHasPassword = u.User.Password()
	}
	switch {
	case s.IAMAuth && s.AuthSecretARN != "":
		return &setting.Error{Var: EnvIAMAuth, Reason: "conflicts with " + EnvAuthSecretARN + "; set one of them"}
	case s.AuthSecretARN != "" && urlHasPassword:
		return &setting.Error{Var: EnvAuthSecretARN, Reason: "conflicts with the password in " + EnvURL + "; set one of them"}
	case s.IAMAuth && urlHasPassword:
		return &setting.Error{Var: EnvIAMAuth, Reason: "conflicts with the password in " + EnvURL + "; remove the password"}
	case s.IAMAuth && u.Scheme != "rediss":
		return &setting.Error{Var: EnvURL, Reason: "must be a rediss:// URL with " + EnvIAMAuth + "=true (ElastiCache accepts IAM auth only over TLS)"}
	case s.IAMAuth && urlUser == "":
		return &setting.Error{Var: EnvURL, Reason: "needs the ElastiCache user id as its username with " + EnvIAMAuth + "=true (rediss://<user-id>@host:port)"}
	case s.IAMAuth && s.CacheName == "":
		return &setting.Error{Var: EnvCacheName, Reason: "required with " + EnvIAMAuth + "=true (the replication group id or serverless cache name)"}
	}
	return nil
}

// parsedURL parses URL with net/url, keeping the URL itself out of any error.
func (s Settings) parsedURL() (*url.URL, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error repeats the whole URL, password included
		}
		return nil, settingError(EnvURL, "not a valid URL", err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, setting.Errorf(EnvURL, "scheme must be redis:// or rediss://, not %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, &setting.Error{Var: EnvURL, Reason: "has no host"}
	}
	return u, nil
}

// redisOptions turns URL into go-redis options: exactly one of the results is non-nil.
func (s Settings) redisOptions() (*redis.Options, *redis.ClusterOptions, error) {
	u, err := s.parsedURL()
	if err != nil {
		return nil, nil, err
	}
	if s.Cluster {
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return nil, nil, setting.Errorf(EnvURL, "selects database %q, but a cluster has only database 0", p)
		}
		u.Path = ""
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, nil, settingError(EnvURL, "rejected by the cluster URL parser", err)
		}
		return nil, o, nil
	}
	o, err := redis.ParseURL(s.URL)
	if err != nil {
		return nil, nil, settingError(EnvURL, "rejected by the URL parser", err)
	}
	return o, nil, nil
}
