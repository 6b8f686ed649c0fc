package redisconn

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// reloadOnNetworkError asks a cluster client to reload its slot map whenever a command gets no
// reply from Redis. After a failover the old master is gone, and go-redis otherwise learns the
// new topology only from a MOVED reply (which a dead node cannot send) or from its periodic
// reload, once a minute: until then every request for that master's slots would answer 503.
// ReloadState is asynchronous and coalesced, so a burst of failures costs one CLUSTER SLOTS.
type reloadOnNetworkError struct{ cluster *redis.ClusterClient }

func (h reloadOnNetworkError) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnNetworkError) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if noReply(err) {
			h.cluster.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnNetworkError) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if noReply(err) {
			h.cluster.ReloadState(ctx)
		}
		return err
	}
}

// noReply reports an error that did not come from a Redis reply: a refused or dropped
// connection, a timeout, a closed pool. The caller's own cancellation is not one.
func noReply(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var reply redis.Error
	return !errors.As(err, &reply)
}
