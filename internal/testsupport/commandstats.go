package testsupport

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// CommandStats returns how many times the server behind c has executed each command, from
// INFO commandstats (which counts the commands a script calls, and the INFO calls themselves,
// as "info"). Command names are lower case, as the server reports them.
func CommandStats(t testing.TB, c redis.Cmdable) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("testsupport: INFO commandstats: %v", err)
	}
	stats := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("testsupport: INFO commandstats line %q: %v", line, err)
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return stats
}
