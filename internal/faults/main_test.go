package faults

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// quiet drops go-redis's internal log lines: the tests cut Redis off on purpose, and thousands
// of "connection refused" lines would bury the measurements each test logs.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	if os.Getenv(pausedChildEnv) == "1" {
		os.Exit(runPausedChild()) // the paused owner of TestPausedOwner
	}
	os.Exit(m.Run())
}
