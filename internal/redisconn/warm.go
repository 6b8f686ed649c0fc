package redisconn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultWarmUp is the bound a function's init gives WithWarmUp: long enough for a TCP connect,
// a TLS handshake and AUTH (or an IAM token) inside the cache's VPC, which take a few
// milliseconds, and short enough that a cold start never waits long for a Redis that is down.
const DefaultWarmUp = time.Second

// WithWarmUp makes Open establish the client's first pooled connection before it returns, for
// at most limit (limit <= 0 means DefaultWarmUp): the TCP connect, the TLS handshake and the
// AUTH, with an IAM token or a password, that the first request of an execution environment
// would otherwise pay. The connection stays in the pool for the invocations that follow.
//
// Open still never fails nor waits longer because Redis is down: the warm-up's error is
// dropped (go-redis logs the failed dial), and the first request dials again, failing fast
// with 503 as before. Default: no warm-up, Open dials nothing.
func WithWarmUp(limit time.Duration) Option {
	return func(o *options) {
		if limit <= 0 {
			limit = DefaultWarmUp
		}
		o.warmUp = limit
	}
}

// warmUpConn runs Warm when WithWarmUp asked for it, ignoring its error (see WithWarmUp).
func (o *options) warmUpConn(ctx context.Context, c *Conn) {
	if o.warmUp > 0 {
		_ = c.Warm(ctx, o.warmUp)
	}
}

// ErrWarmUpTimeout is returned by Warm when the connection was not ready within its limit.
var ErrWarmUpTimeout = errors.New("redisconn: warm-up timed out")

// Warm establishes a pooled connection to every primary the client uses (the one server, or
// each cluster master after the cluster's slots are loaded) with one PING each, and returns
// within limit (limit <= 0 means DefaultWarmUp) whatever Redis does: ErrWarmUpTimeout when the
// limit passed first, the PING's error, or nil. A PING that is still running when Warm returns
// carries on in the background and ends at its own timeouts.
func (c *Conn) Warm(ctx context.Context, limit time.Duration) error {
	if limit <= 0 {
		limit = DefaultWarmUp
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- ping(ctx, c.Client)
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("%w after %s: %w", ErrWarmUpTimeout, limit, err)
		}
		if err != nil {
			return fmt.Errorf("redisconn: warm-up: %w", err)
		}
		return nil
	case <-timer.C:
		return fmt.Errorf("%w after %s", ErrWarmUpTimeout, limit)
	}
}

// ping sends one PING on a pooled connection of each primary of client.
func ping(ctx context.Context, client redis.UniversalClient) error {
	if cc, ok := client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return node.Ping(ctx).Err()
		})
	}
	return client.Ping(ctx).Err()
}
