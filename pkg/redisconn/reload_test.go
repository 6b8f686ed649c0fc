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
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{redis.Nil, false},
		{context.Canceled, false},
		{redis.ErrNoScript, false},
		{io.EOF, true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{context.DeadlineExceeded, true},
		{redis.ErrPoolTimeout, true},
	} {
		if got := noReply(tc.err); got != tc.want {
			t.Errorf("noReply(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
