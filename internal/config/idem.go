package config

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/idem"
)

// IdemOptions reads the core's settings through getenv: IDEM_KEY_PREFIX (default "idem"),
// IDEM_RESULT_TTL (Go duration, default resultTTL, the calling function's own default),
// IDEM_LOCK_TTL (Go duration, default derived from the invocation deadline) and IDEM_FAIL_OPEN
// (true: run the work unguarded when Redis is unreachable; default false, fail closed). A
// malformed value is a *setting.Error naming the variable.
func IdemOptions(getenv func(string) string, resultTTL time.Duration) ([]idem.Option, error) {
	if resultTTL <= 0 {
		return nil, fmt.Errorf("config: default result TTL %s is not positive", resultTTL)
	}
	opts := []idem.Option{idem.WithResultTTL(resultTTL)}
	if p := getenv("IDEM_KEY_PREFIX"); p != "" {
		if err := checkPrefix(p); err != nil {
			return nil, setting.Errorf("IDEM_KEY_PREFIX", "%v", err)
		}
		opts = append(opts, idem.WithPrefix(p))
	}
	for _, v := range []struct {
		name string
		opt  func(time.Duration) idem.Option
	}{{"IDEM_RESULT_TTL", idem.WithResultTTL}, {"IDEM_LOCK_TTL", idem.WithLockTTL}} {
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
		opts = append(opts, idem.WithFailOpen(on))
	}
	return opts, nil
}

// checkPrefix refuses what idem.New refuses in a prefix (a space, a control character, a brace,
// which would break the key's hash tag), here so that the error names the variable.
func checkPrefix(p string) error {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == '{' || c == '}' || c == 0x7f {
			return fmt.Errorf("%q holds a space, control character or brace", p)
		}
	}
	return nil
}
