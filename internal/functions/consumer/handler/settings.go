package handler

import (
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/idem/idemsqs"
)

// Environment variables read by New. The Redis settings (REDIS_*) are those of
// redisconn.SettingsFromEnv, the idempotency settings (IDEM_*) those of config.IdemOptions
// (IDEM_RESULT_TTL defaulting to DefaultResultTTL); LOG_LEVEL is obs.EnvLogLevel.
const (
	// EnvConcurrency bounds how many records of a batch are processed at once (records of one
	// FIFO message group never are). Default idemsqs.DefaultConcurrency (10); 1 to 1000.
	EnvConcurrency = "CONSUMER_CONCURRENCY"
	// EnvFunctionName is set by Lambda; it becomes the function attribute of every log line.
	// Outside Lambda the function is called consumer.
	EnvFunctionName = "AWS_LAMBDA_FUNCTION_NAME"
)

// DefaultResultTTL is how long the outcome of a processed event is kept when IDEM_RESULT_TTL
// is unset: 5 days, longer than the 4 days the template's queue keeps a message (so no
// redelivery can outlive it) and than every webhook function's own retention (so an event the
// webhook function forwards twice, after losing its claim, is still recognised).
const DefaultResultTTL = 5 * 24 * time.Hour

// maxConcurrency bounds EnvConcurrency.
const maxConcurrency = 1000

// settings are the function's own variables, parsed and checked before anything is built.
type settings struct {
	concurrency int
	level       slog.Level
	function    string
}

func readSettings(getenv func(string) string) (settings, error) {
	s := settings{concurrency: idemsqs.DefaultConcurrency, function: strings.TrimSpace(getenv(EnvFunctionName))}
	if s.function == "" {
		s.function = "consumer"
	}
	if v := strings.TrimSpace(getenv(EnvConcurrency)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxConcurrency {
			return s, setting.Errorf(EnvConcurrency, "%q is not a number from 1 to %d", v, maxConcurrency)
		}
		s.concurrency = n
	}
	var err error
	s.level, err = obs.LevelFromEnv(getenv)
	return s, err
}
