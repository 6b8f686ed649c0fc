package handler

import (
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/idem"
)

// Option changes how New builds a Handler. The options exist for tests and for tools that run
// the handler in-process (a local API server); a Lambda function passes none.
type Option func(*options)

type options struct {
	redis         redis.UniversalClient
	redisOpts     []redisconn.Option
	sink          sink.Sink
	now           func() time.Time
	logOut        io.Writer
	secrets       []string
	secretsSet    bool
	secretsClient redisconn.SecretsClient
	guardOpts     []idem.Option
	payloads      sink.PayloadStore
}

// WithRedis makes the handler use c instead of the client redisconn.Open builds from the REDIS_*
// variables, which are then not read. The caller owns c: Close does not close it.
func WithRedis(c redis.UniversalClient) Option { return func(o *options) { o.redis = c } }

// WithRedisOptions passes opts to redisconn.Open when the handler builds its own client (no
// WithRedis), e.g. redisconn.WithTimeouts or redisconn.WithRootCAs.
func WithRedisOptions(opts ...redisconn.Option) Option {
	return func(o *options) { o.redisOpts = append(o.redisOpts, opts...) }
}

// WithGuardOptions adds opts to the idempotency guard's options, after those of the IDEM_*
// variables (e.g. idem.WithLockTTL).
func WithGuardOptions(opts ...idem.Option) Option {
	return func(o *options) { o.guardOpts = append(o.guardOpts, opts...) }
}

// WithSink makes the handler forward events to s instead of the sink sink.FromEnv builds from
// WEBHOOK_SINK, which is then not read.
func WithSink(s sink.Sink) Option { return func(o *options) { o.sink = s } }

// WithPayloadStore makes the sink that sink.FromEnv builds (sqs, eventbridge) keep events too
// large for one message in store instead of the S3 bucket of WEBHOOK_PAYLOAD_BUCKET: the local
// API's and the tests' in-process store. It does nothing with WithSink.
func WithPayloadStore(store sink.PayloadStore) Option {
	return func(o *options) { o.payloads = store }
}

// WithClock replaces time.Now for checking signed timestamps against the tolerance and for
// the events' ReceivedAt. It does not change the idempotency core's clock, whose claim and
// work deadlines follow the real time of the invocation. Default time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLogOutput sends the handler's log lines (one per request, plus those of init) and the
// log sink's event lines to w. Default os.Stdout, where Lambda collects them.
func WithLogOutput(w io.Writer) Option { return func(o *options) { o.logOut = w } }

// WithSecrets makes the handler accept deliveries signed with any of secrets, instead of those
// of WEBHOOK_SECRET or WEBHOOK_SECRET_ARN, which are then not read. They are taken as given:
// the refusal of development secrets inside Lambda applies to those two variables, which is
// where a deployment's secret comes from.
func WithSecrets(secrets ...string) Option {
	return func(o *options) { o.secrets, o.secretsSet = append([]string(nil), secrets...), true }
}

// WithSecretsClient reads WEBHOOK_SECRET_ARN through c instead of a Secrets Manager client
// built from the default AWS configuration.
func WithSecretsClient(c redisconn.SecretsClient) Option {
	return func(o *options) { o.secretsClient = c }
}
