package idem

import (
	"fmt"
	"strconv"
	"time"
)

// SettingError names the environment variable whose value is malformed.
type SettingError struct {
	Var    string // e.g. "IDEM_RESULT_TTL"
	Reason string
}

func (e *SettingError) Error() string { return e.Var + ": " + e.Reason }

// OptionsFromEnv reads the core's settings (SPEC section 2) through getenv:
// IDEM_KEY_PREFIX (default "idem"), IDEM_RESULT_TTL (Go duration, default resultTTL, the
// calling function's own default) and IDEM_LOCK_TTL (Go duration, default derived from the
// invocation deadline), IDEM_FAIL_OPEN (true: run the work unguarded when Redis is
// unreachable; default false, fail closed) and IDEM_CONDITIONAL_SET (true: store results with
// SET ... IFEQ on Valkey 8.1+ or Redis 8.4+, see [WithConditionalSet]; default false). A
// malformed value is a *SettingError naming the variable.
func OptionsFromEnv(getenv func(string) string, resultTTL time.Duration) ([]Option, error) {
	if resultTTL <= 0 {
		return nil, fmt.Errorf("idem: default result TTL %s is not positive", resultTTL)
	}
	opts := []Option{WithResultTTL(resultTTL)}
	if p := getenv("IDEM_KEY_PREFIX"); p != "" {
		if err := (options{prefix: p}).validatePrefix(); err != nil {
			return nil, &SettingError{Var: "IDEM_KEY_PREFIX", Reason: err.Error()}
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
			return nil, &SettingError{Var: v.name, Reason: fmt.Sprintf("%q is not a Go duration of at least 1s, such as 24h or 90s", s)}
		}
		opts = append(opts, v.opt(d))
	}
	for _, v := range []struct {
		name string
		opt  func(bool) Option
	}{{"IDEM_FAIL_OPEN", WithFailOpen}, {"IDEM_CONDITIONAL_SET", WithConditionalSet}} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		on, err := strconv.ParseBool(s)
		if err != nil {
			return nil, &SettingError{Var: v.name, Reason: fmt.Sprintf("%q is not true or false", s)}
		}
		opts = append(opts, v.opt(on))
	}
	return opts, nil
}
