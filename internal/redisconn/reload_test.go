package redisconn

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestOnlyErrorsWithoutAReplyTriggerAClusterReload(t *testing.T) {
	for want, errs := range map[bool][]error{
		false: {nil, redis.Nil, context.Canceled, redis.ErrNoScript},
		true:  {io.EOF, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, context.DeadlineExceeded, redis.ErrPoolTimeout},
	} {
		for _, err := range errs {
			if got := noReply(err); got != want {
				t.Errorf("noReply(%v) = %v, want %v", err, got, want)
			}
		}
	}
}
