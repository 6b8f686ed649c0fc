package idem

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemlambda/idem/internal/setting"
)

// OptionsFromEnv reads the core's settings through getenv: IDEM_KEY_PREFIX (default "idem"),
// IDEM_RESULT_TTL (Go duration, default resultTTL, the calling function's own default),
// IDEM_LOCK_TTL (Go duration, default derived from the invocation deadline) and IDEM_FAIL_OPEN
// (true: run the work unguarded when Redis is unreachable; default false, fail closed). A
// malformed value is a *setting.Error naming the variable.
func OptionsFromEnv(getenv func(string) string, resultTTL time.Duration) ([]Option, error) {
	if resultTTL <= 0 {
		return nil, fmt.Errorf("idem: default result TTL %s is not positive", resultTTL)
	}
	opts := []Option{WithResultTTL(resultTTL)}
	if p := getenv("IDEM_KEY_PREFIX"); p != "" {
		if err := (options{prefix: p}).validatePrefix(); err != nil {
			return nil, setting.Errorf("IDEM_KEY_PREFIX", "%v", err)
		}
		opts = append(opts, WithPrefix(p))
	}
	for _, v := range []struct {
		name string
		opt  func(time.Duration) Option
	}{{"IDEM_RESULT_TTL", WithResultTTL}, {"IDEM_LOCK_TTL", WithLockTTL}} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			return nil, setting.Errorf(v.name, "%q is not a Go duration of at least 1s, such as 24h or 90s", s)
		}
		opts = append(opts, v.opt(d))
	}
	if s := getenv("IDEM_FAIL_OPEN"); s != "" {
		on, err := strconv.ParseBool(s)
		if err != nil {
			return nil, setting.Errorf("IDEM_FAIL_OPEN", "%q is not true or false", s)
		}
		opts = append(opts, WithFailOpen(on))
	}
	return opts, nil
}
