package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/idem"
)

// IdemOptions reads the core's settings through getenv: IDEM_KEY_PREFIX (default "idem"),
// IDEM_RESULT_TTL (Go duration, default resultTTL, the calling function's own default),
// IDEM_LOCK_TTL (Go duration, default derived from the invocation deadline), IDEM_FAIL_OPEN
// (true: run the work unguarded when Redis is unreachable; default false, fail closed), and
// IDEM_MIN_REPLICAS, IDEM_REPLICA_TIMEOUT and IDEM_UNSAFE_EVICTION (below). A malformed value
// is a *setting.Error naming the variable.
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
	more, err := durabilityOptionsFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	return append(opts, more...), nil
}

// The settings of replica acknowledgement and of the eviction check (WithMinReplicas,
// WithUnsafeEviction).
const (
	// envMinReplicas is how many replicas must acknowledge a claim before the work runs, 0 to
	// 5 (a shard has at most 5 replicas on ElastiCache); default 0, off.
	envMinReplicas = "IDEM_MIN_REPLICAS"
	// envReplicaTimeout is how long a claim waits for them, a Go duration from 1ms to
	// maxReplicaTimeout; default defaultReplicaTimeout. Only read with envMinReplicas above 0.
	envReplicaTimeout = "IDEM_REPLICA_TIMEOUT"
	// envUnsafeEviction is what to do when the store's maxmemory-policy can evict claims and
	// results (anything but noeviction): "warn" (the default: run, and log it at init) or
	// "refuse" (answer every call Unavailable until the policy reads noeviction).
	envUnsafeEviction = "IDEM_UNSAFE_EVICTION"
)

// defaultReplicaTimeout is envReplicaTimeout's default: a replica in another availability zone
// acknowledges within a few milliseconds, and a lagging one is cut off before the request waits
// long.
const defaultReplicaTimeout = 50 * time.Millisecond

// maxReplicaTimeout is the largest envReplicaTimeout: below the 500ms read timeout of
// redisconn's clients, so the WAIT's own reply arrives before the client gives up on it.
const maxReplicaTimeout = 400 * time.Millisecond

// durabilityOptionsFromEnv reads envMinReplicas, envReplicaTimeout and envUnsafeEviction.
func durabilityOptionsFromEnv(getenv func(string) string) ([]idem.Option, error) {
	var opts []idem.Option
	if s := strings.TrimSpace(getenv(envMinReplicas)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 5 {
			return nil, setting.Errorf(envMinReplicas, "%q is not a number of replicas from 0 to 5", s)
		}
		timeout := defaultReplicaTimeout
		if s := strings.TrimSpace(getenv(envReplicaTimeout)); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < time.Millisecond || d > maxReplicaTimeout {
				return nil, setting.Errorf(envReplicaTimeout, "%q is not a Go duration from 1ms to %s, such as 50ms", s, maxReplicaTimeout)
			}
			timeout = d
		}
		if n > 0 {
			opts = append(opts, idem.WithMinReplicas(n, timeout))
		}
	}
	switch s := strings.TrimSpace(getenv(envUnsafeEviction)); s {
	case "", "warn":
	case "refuse":
		opts = append(opts, idem.WithUnsafeEviction(idem.EvictionRefuse))
	default:
		return nil, setting.Errorf(envUnsafeEviction, "%q is not warn or refuse", s)
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
