package idem

import (
	"fmt"
	"time"
)

// OptionsFromEnv reads the core's settings (SPEC section 2) through getenv:
// IDEM_KEY_PREFIX (default "idem"), IDEM_RESULT_TTL (Go duration, default resultTTL, the
// calling function's own default) and IDEM_LOCK_TTL (Go duration, default derived from the
// invocation deadline). A malformed value is an error naming the variable.
func OptionsFromEnv(getenv func(string) string, resultTTL time.Duration) ([]Option, error) {
	opts := []Option{WithResultTTL(resultTTL)}
	if p := getenv("IDEM_KEY_PREFIX"); p != "" {
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
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive Go duration such as 24h or 90s", v.name, s)
		}
		opts = append(opts, v.opt(d))
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("IDEM_* settings: %w", err)
	}
	return opts, nil
}
