package handler

import (
	"io"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/idem"
)

// Option changes how New builds a Handler.
type Option func(*options)

type options struct {
	process   Process
	redis     redis.UniversalClient
	redisOpts []redisconn.Option
	logOut    io.Writer
	guardOpts []idem.Option
	payloads  sink.PayloadStore
}

// WithPayloadStore reads the payloads the sinks kept out of their messages from store instead
// of the S3 bucket of WEBHOOK_PAYLOAD_BUCKET: the local API's and the tests' in-process store.
func WithPayloadStore(store sink.PayloadStore) Option { return func(o *options) { o.payloads = store } }

// WithProcess makes p the work done once per forwarded event: this is where an application
// puts its own. Default: one JSON log line per event (LogProcess).
func WithProcess(p Process) Option { return func(o *options) { o.process = p } }

// WithRedis makes the handler use c instead of the client redisconn.Open builds from the REDIS_*
// variables, which are then not read. The caller owns c: Close does not close it.
func WithRedis(c redis.UniversalClient) Option { return func(o *options) { o.redis = c } }

// WithRedisOptions passes opts to redisconn.Open when the handler builds its own client (no
// WithRedis), e.g. redisconn.WithWarmUp.
func WithRedisOptions(opts ...redisconn.Option) Option {
	return func(o *options) { o.redisOpts = append(o.redisOpts, opts...) }
}

// WithGuardOptions adds opts to the idempotency guard's options, after those of the IDEM_*
// variables.
func WithGuardOptions(opts ...idem.Option) Option {
	return func(o *options) { o.guardOpts = append(o.guardOpts, opts...) }
}

// WithLogOutput sends the handler's log lines to w. Default os.Stdout, where Lambda collects
// them.
func WithLogOutput(w io.Writer) Option { return func(o *options) { o.logOut = w } }
