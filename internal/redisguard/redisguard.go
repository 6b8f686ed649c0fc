// Package redisguard builds the idempotency guard a function serves with: on the Redis client
// the function was given, or on one it opens from redisconn.Settings. Both functions end their
// set-up this way, and a client opened here must be closed again when the guard cannot be built.
package redisguard

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/redis/go-redis/v9"
)

// Config says which client the guard uses and how to build it.
type Config struct {
	// Client, when not nil, is used as is and left open, even on error; Settings, AWS and
	// RedisOptions are then ignored.
	Client redis.UniversalClient
	// Settings is the connection opened when Client is nil.
	Settings redisconn.Settings
	// AWS, when not nil, is the AWS configuration the connection signs IAM tokens and reads
	// secrets with; it goes ahead of RedisOptions, which can override it.
	AWS *aws.Config
	// RedisOptions are passed to redisconn.Open.
	RedisOptions []redisconn.Option
	// GuardOptions are passed to idem.New.
	GuardOptions []idem.Option
}

// Open returns the guard on c.Client, or, when it is nil, on a connection opened from
// c.Settings, which it also returns for the caller to close (conn is nil otherwise). When the
// guard cannot be built, the connection Open opened is closed before it returns the error.
func Open(ctx context.Context, c Config) (guard *idem.Guard, conn *redisconn.Conn, err error) {
	client := c.Client
	if client == nil {
		opts := c.RedisOptions
		if c.AWS != nil {
			opts = append([]redisconn.Option{redisconn.WithAWSConfig(*c.AWS)}, opts...)
		}
		if conn, err = redisconn.Open(ctx, c.Settings, opts...); err != nil {
			return nil, nil, fmt.Errorf("redis: %w", err)
		}
		client = conn.Client
	}
	if guard, err = idem.New(client, c.GuardOptions...); err != nil {
		return nil, nil, fmt.Errorf("idempotency guard: %w", errors.Join(err, conn.Close()))
	}
	return guard, conn, nil
}
