package testsupport

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// CommandCounter is a go-redis hook (add it with AddHook) counting what a client does:
// Commands counts every command sent, each one of a pipeline included; RoundTrips counts a
// single command or a whole pipeline once; Dials counts new connections. Read and reset them
// with their atomic methods.
type CommandCounter struct {
	Commands, RoundTrips, Dials atomic.Int64
}

// DialHook counts one dial.
func (c *CommandCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.Dials.Add(1)
		return next(ctx, network, addr)
	}
}

// ProcessHook counts one command and one round trip.
func (c *CommandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.Commands.Add(1)
		c.RoundTrips.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts the pipeline's commands and one round trip.
func (c *CommandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.Commands.Add(int64(len(cmds)))
		c.RoundTrips.Add(1)
		return next(ctx, cmds)
	}
}
