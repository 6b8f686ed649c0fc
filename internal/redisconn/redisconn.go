// Package redisconn builds the Redis client a function uses, once per Lambda execution
// environment, from the REDIS_* settings: standalone or cluster, plain or TLS, with a password
// from the URL, from Secrets Manager, or ElastiCache IAM auth tokens. REDIS_URL is always
// required: this package never starts a server (the local API starts its embedded Redis
// itself and hands the client to the handlers), so no function links one.
//
// The client is lazy: Open never dials Redis, so init neither fails nor waits because Redis
// is down; the first command that needs a connection makes it. Timeouts are short, so a
// request that cannot reach Redis fails within about a second and can be answered with 503.
//
//	s, err := redisconn.SettingsFromEnv(os.Getenv)
//	if err != nil {
//		// log the error (it names the variable) and exit: init failed
//	}
//	conn, err := redisconn.Open(ctx, s)
//	if err != nil {
//		// likewise
//	}
//	// conn.Client is a redis.UniversalClient (and a redis.Scripter) for the core.
package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/idemlambda/idem/internal/setting"
)

// Client defaults chosen for Lambda. Query parameters in REDIS_URL with go-redis's names
// (dial_timeout, read_timeout, write_timeout, pool_size, max_retries, conn_max_idle_time, ...)
// take precedence over them; Options change the defaults.
const (
	// DefaultDialTimeout bounds one TCP (and TLS) connect. Override with WithTimeouts.
	DefaultDialTimeout = time.Second
	// DefaultReadTimeout bounds waiting for one reply; the core's commands are O(1) and
	// answer in well under a millisecond, so this only ever fires on a sick network or
	// server. A context deadline that ends sooner wins. Override with WithTimeouts.
	DefaultReadTimeout = 500 * time.Millisecond
	// DefaultWriteTimeout bounds writing one command. Override with WithTimeouts.
	DefaultWriteTimeout = 500 * time.Millisecond
	// DefaultPoolSize is the pool size when AWS_LAMBDA_MAX_CONCURRENCY is unset or smaller: an
	// execution environment runs one invocation at a time, and a few spare connections cover
	// a handler that overlaps calls.
	DefaultPoolSize = 4
	// DefaultMaxRetries is how often a command is retried after a network error (a pooled
	// connection that died while the environment was frozen, a failover). Each retry dials
	// at most once.
	DefaultMaxRetries = 1
	// DefaultMaxRedirects bounds the attempts of a cluster command (MOVED/ASK redirects and
	// network-error retries alike); node-level retries are off in cluster mode, so the two
	// do not multiply.
	DefaultMaxRedirects = 2
	// DefaultConnMaxIdleTime closes a pooled connection idle longer than this before reuse
	// (a frozen environment's connections included), staying below the 350 seconds after
	// which Lambda's VPC network interfaces and NAT gateways silently drop an idle TCP flow,
	// and below any idle timeout of 300 seconds or more in the cache's parameter group.
	DefaultConnMaxIdleTime = 4 * time.Minute
	// IAMConnMaxLifetime replaces connections made with IAM auth before ElastiCache closes
	// them, which it does 12 hours after their AUTH.
	IAMConnMaxLifetime = 11 * time.Hour

	minRetryBackoff = 10 * time.Millisecond
	maxRetryBackoff = 100 * time.Millisecond
)

// Option changes how Open builds the client.
type Option func(*options)

type options struct {
	dialTimeout  time.Duration
	readTimeout  time.Duration
	writeTimeout time.Duration
	rootCAs      *x509.CertPool
	secrets      SecretsClient
	creds        aws.CredentialsProvider
	region       string
	awsConfig    *aws.Config
	now          func() time.Time
	warmUp       time.Duration // see WithWarmUp; 0: none
}

// WithTimeouts sets the dial, read and write timeouts, replacing DefaultDialTimeout,
// DefaultReadTimeout and DefaultWriteTimeout. A zero argument keeps that default; -1 means
// no timeout, as in go-redis. Query parameters in REDIS_URL still win.
func WithTimeouts(dial, read, write time.Duration) Option {
	return func(o *options) {
		if dial != 0 {
			o.dialTimeout = dial
		}
		if read != 0 {
			o.readTimeout = read
		}
		if write != 0 {
			o.writeTimeout = write
		}
	}
}

// WithRootCAs verifies the server certificate of a rediss:// URL against pool instead of the
// system roots (which already trust ElastiCache's certificates). It has no effect on redis://.
func WithRootCAs(pool *x509.CertPool) Option {
	return func(o *options) { o.rootCAs = pool }
}

// WithSecretsClient reads REDIS_AUTH_SECRET_ARN through c instead of a Secrets Manager
// client built from the AWS config.
func WithSecretsClient(c SecretsClient) Option {
	return func(o *options) { o.secrets = c }
}

// WithCredentials signs IAM auth tokens with p instead of the AWS config's credentials.
func WithCredentials(p aws.CredentialsProvider) Option {
	return func(o *options) { o.creds = p }
}

// WithRegion signs IAM auth tokens for region instead of the AWS config's region.
func WithRegion(region string) Option {
	return func(o *options) { o.region = region }
}

// WithAWSConfig uses cfg for credentials, region and the Secrets Manager client, instead of
// loading the default config (config.LoadDefaultConfig) when one of them is needed. A
// function that already loaded its config for other clients passes it here.
func WithAWSConfig(cfg aws.Config) Option {
	return func(o *options) { o.awsConfig = &cfg }
}

// WithClock makes IAM auth tokens use now instead of time.Now, for signing time and refresh.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// Conn is the Redis client of one execution environment. Build it once, at init, and share
// it between invocations.
type Conn struct {
	// Client is a *redis.Client, or a *redis.ClusterClient with Settings.Cluster.
	Client redis.UniversalClient

	addr      string
	closeOnce sync.Once
	closeErr  error
}

// Addr returns the host:port the client connects to (the first seed node in cluster mode).
func (c *Conn) Addr() string { return c.addr }

// Close closes the client. Calls after the first return the first call's result. Closing a
// nil *Conn does nothing, so an owner that may not have opened one can close it as it is.
func (c *Conn) Close() error {
	if c == nil {
		return nil
	}
	c.closeOnce.Do(func() {
		if err := c.Client.Close(); err != nil {
			c.closeErr = fmt.Errorf("redisconn: close client: %w", err)
		}
	})
	return c.closeErr
}

// Open builds the client for s. It does not dial Redis (unless WithWarmUp asks it to, within a
// bound): a Redis that is down costs nothing here and makes the first command fail fast
// instead. It does, when s asks for them, read the Secrets Manager secret (bounded by
// SecretReadTimeout) and sign a first IAM auth token, so a broken credential fails init rather
// than every request.
//
// The client's settings, unless REDIS_URL's query parameters say otherwise: DialTimeout
// DefaultDialTimeout with one dial per attempt; ReadTimeout DefaultReadTimeout and
// WriteTimeout DefaultWriteTimeout, with context deadlines honoured (ContextTimeoutEnabled);
// MaxRetries DefaultMaxRetries with 10-100ms backoff (cluster: node retries off,
// MaxRedirects DefaultMaxRedirects); PoolSize max(s.MaxConcurrency, DefaultPoolSize);
// MinIdleConns 0; ConnMaxIdleTime DefaultConnMaxIdleTime; no separate pipeline pool, so a
// pipeline reuses the warm connection instead of dialing; no CLIENT SETINFO or maintenance
// notification handshakes, which would add round trips to every new connection; for
// rediss://, TLS 1.2 or later with the server name taken from the URL's host.
//
// Errors about the settings, the secret or the AWS config are *setting.Error (found with
// errors.As), naming the variable; an empty s.URL is one, naming REDIS_URL.
func Open(ctx context.Context, s Settings, opts ...Option) (*Conn, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	o := options{
		dialTimeout:  DefaultDialTimeout,
		readTimeout:  DefaultReadTimeout,
		writeTimeout: DefaultWriteTimeout,
		now:          time.Now,
	}
	for _, opt := range opts {
		opt(&o)
	}

	single, cluster, err := s.redisOptions()
	if err != nil {
		return nil, err
	}
	var f clientFields
	maxRetries := DefaultMaxRetries
	if cluster != nil {
		f, maxRetries = fieldsOf(cluster), -1
		setDefault(&cluster.MaxRedirects, DefaultMaxRedirects)
		cluster.ReadOnly = false
	} else {
		f = fieldsOf(single)
	}
	creds, err := o.auth(ctx, s, *f.Username)
	if err != nil {
		return nil, err
	}
	o.applyShared(f, s, maxRetries)
	creds.apply(f)
	if cluster != nil {
		cc := redis.NewClusterClient(cluster)
		cc.AddHook(reloadOnNetworkError{cluster: cc})
		c := &Conn{Client: cc, addr: cluster.Addrs[0]}
		o.warmUpConn(ctx, c)
		return c, nil
	}
	c := &Conn{Client: redis.NewClient(single), addr: single.Addr}
	o.warmUpConn(ctx, c)
	return c, nil
}

// auth is what a client authenticates with besides the URL's own username and
// password: a password (and optionally a username) from Secrets Manager, or IAM auth tokens.
// The zero value changes nothing.
type auth struct {
	username, password string
	iam                func(context.Context) (username, password string, err error)
}

// auth reads the secret or signs a first IAM auth token for urlUser, as s asks.
func (o *options) auth(ctx context.Context, s Settings, urlUser string) (auth, error) {
	switch {
	case s.AuthSecretARN != "":
		client, err := o.secretsClient(ctx)
		if err != nil {
			return auth{}, err
		}
		user, password, err := readAuthSecret(ctx, client, s.AuthSecretARN)
		if err != nil {
			return auth{}, err
		}
		return auth{username: user, password: password}, nil
	case s.IAMAuth:
		tokens, err := o.iamTokens(ctx, s, urlUser)
		if err != nil {
			return auth{}, err
		}
		return auth{iam: tokens.credentials}, nil
	}
	return auth{}, nil
}

// apply sets c on the fields of a client's options.
func (c auth) apply(f clientFields) {
	if c.password != "" {
		*f.Password = c.password
		if c.username != "" {
			*f.Username = c.username
		}
	}
	if c.iam != nil {
		*f.CredentialsProviderContext = c.iam
		// ElastiCache closes a connection 12 hours after its AUTH.
		setDefault(f.ConnMaxLifetime, IAMConnMaxLifetime)
	}
}

func poolSize(s Settings) int {
	return max(s.MaxConcurrency, DefaultPoolSize)
}

// setDefault sets *p to v when *p is the zero value, which go-redis reads as "default" and
// ParseURL leaves for a query parameter that is absent.
func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// clientFields points at the fields redis.Options and redis.ClusterOptions share, so that
// one function gives both clients the same defaults and credentials. Each field is named and
// typed like the one it points at; fieldsOf fills them.
type clientFields struct {
	DialTimeout, ReadTimeout, WriteTimeout *time.Duration
	MinRetryBackoff, MaxRetryBackoff       *time.Duration
	ConnMaxIdleTime, ConnMaxLifetime       *time.Duration
	MaxRetries, PoolSize, PipelinePoolSize *int
	DialerRetries                          *int
	ContextTimeoutEnabled, DisableIdentity *bool
	MaintNotificationsConfig               **maintnotifications.Config
	TLSConfig                              **tls.Config
	Username, Password                     *string
	CredentialsProviderContext             *func(context.Context) (string, string, error)
}

// fieldsOf points the fields of a clientFields at those of the same name in r. The two option
// types have no common interface, but share these fields; a field either lacks panics, which
// every Open (and so every test of it) would show.
func fieldsOf[T redis.Options | redis.ClusterOptions](r *T) clientFields {
	var f clientFields
	src, dst := reflect.ValueOf(r).Elem(), reflect.ValueOf(&f).Elem()
	for i := range dst.NumField() {
		dst.Field(i).Set(src.FieldByName(dst.Type().Field(i).Name).Addr())
	}
	return f
}

// applyShared sets the defaults every client gets; maxRetries is the one that differs: a
// cluster client retries through redirects, and -1 leaves that to MaxRedirects.
func (o *options) applyShared(f clientFields, s Settings, maxRetries int) {
	setDefault(f.DialTimeout, o.dialTimeout)
	setDefault(f.ReadTimeout, o.readTimeout)
	setDefault(f.WriteTimeout, o.writeTimeout)
	setDefault(f.MaxRetries, maxRetries)
	setDefault(f.MinRetryBackoff, minRetryBackoff)
	setDefault(f.MaxRetryBackoff, maxRetryBackoff)
	setDefault(f.PoolSize, poolSize(s))
	setDefault(f.ConnMaxIdleTime, DefaultConnMaxIdleTime)
	setDefault(f.PipelinePoolSize, -1)
	// The command retry re-dials; dial retries on top would multiply the time to fail.
	setDefault(f.DialerRetries, 1)
	*f.ContextTimeoutEnabled = true
	*f.DisableIdentity = true
	*f.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	o.applyTLS(*f.TLSConfig)
}

// applyTLS completes the TLS config go-redis's URL parsers make for rediss://, which sets the
// server name from the URL's host (for a cluster, that of the configuration endpoint, which
// ElastiCache's wildcard certificates also cover for the node endpoints).
func (o *options) applyTLS(t *tls.Config) {
	if t == nil {
		return
	}
	if t.MinVersion < tls.VersionTLS12 {
		t.MinVersion = tls.VersionTLS12
	}
	if o.rootCAs != nil {
		t.RootCAs = o.rootCAs
	}
}

// loadAWSConfig returns the AWS config given by WithAWSConfig, or loads the default one.
func (o *options) loadAWSConfig(ctx context.Context, forVar string) (aws.Config, error) {
	if o.awsConfig != nil {
		return *o.awsConfig, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, settingError(forVar, "cannot load the AWS config", err)
	}
	o.awsConfig = &cfg
	return cfg, nil
}

func (o *options) secretsClient(ctx context.Context) (SecretsClient, error) {
	if o.secrets != nil {
		return o.secrets, nil
	}
	cfg, err := o.loadAWSConfig(ctx, EnvAuthSecretARN)
	if err != nil {
		return nil, err
	}
	// NewFromConfig honours AWS_ENDPOINT_URL_SECRETS_MANAGER / AWS_ENDPOINT_URL.
	return secretsmanager.NewFromConfig(cfg), nil
}

// iamTokens builds the token source and signs the first token, so that missing credentials or
// region fail Open.
func (o *options) iamTokens(ctx context.Context, s Settings, userID string) (*iamTokens, error) {
	creds, region := o.creds, o.region
	if creds == nil || region == "" {
		cfg, err := o.loadAWSConfig(ctx, EnvIAMAuth)
		if err != nil {
			return nil, err
		}
		if creds == nil {
			creds = cfg.Credentials
		}
		if region == "" {
			region = cfg.Region
		}
	}
	if region == "" {
		return nil, &setting.Error{Var: EnvRegion, Reason: "required with " + EnvIAMAuth + "=true (Lambda sets it)"}
	}
	if creds == nil {
		return nil, &setting.Error{Var: EnvIAMAuth, Reason: "no AWS credentials found to sign auth tokens"}
	}
	t := &iamTokens{
		creds:      creds,
		region:     region,
		userID:     userID,
		cacheName:  s.CacheName,
		serverless: s.Serverless,
		now:        o.now,
	}
	if _, _, err := t.credentials(ctx); err != nil {
		return nil, settingError(EnvIAMAuth, "cannot sign an auth token", err)
	}
	return t, nil
}
