package config_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

func TestIdemOptionsReachTheGuard(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	opts, err := config.IdemOptions(testsupport.Env(map[string]string{
		"IDEM_KEY_PREFIX": "p", "IDEM_RESULT_TTL": "96h", "IDEM_LOCK_TTL": "45s",
	}), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(m.NewClient(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	var claimTTL time.Duration
	_, err = g.Do(context.Background(), idem.Key{Scope: "s", ID: "k"}, idem.Fingerprint{}, func(context.Context) (idem.Result, error) {
		claimTTL = m.TTL(m.Keys()[0])
		return idem.Result{Status: 200}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keys := m.Keys()
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "p:{s:") {
		t.Fatalf("keys %v, want one under the prefix p", keys)
	}
	if claimTTL != 45*time.Second || m.TTL(keys[0]) != 96*time.Hour {
		t.Fatalf("claim TTL %s, result TTL %s; want 45s and 96h", claimTTL, m.TTL(keys[0]))
	}
}

func TestIdemOptionsFailOpenRunsTheWorkWhenRedisIsDown(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	opts, err := config.IdemOptions(testsupport.Env(map[string]string{"IDEM_FAIL_OPEN": "true"}), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(m.NewClient(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	out, err := g.Do(context.Background(), idem.Key{Scope: "s", ID: "k"}, idem.Fingerprint{}, func(context.Context) (idem.Result, error) {
		return idem.Result{Status: 200}, nil
	})
	if out.Kind != idem.ExecutedUnguarded || err != nil {
		t.Fatalf("%s %v, want executed_unguarded", out.Kind, err)
	}
}

func TestIdemOptionsErrorsNameTheVariable(t *testing.T) {
	for name, value := range map[string]string{
		"IDEM_RESULT_TTL": "forever",
		"IDEM_LOCK_TTL":   "-1s",
		"IDEM_KEY_PREFIX": "a{b}",
		"IDEM_FAIL_OPEN":  "sometimes",
	} {
		var se *setting.Error
		if _, err := config.IdemOptions(testsupport.Env(map[string]string{name: value}), time.Hour); !errors.As(err, &se) || se.Var != name {
			t.Errorf("%s=%s: %v, want a *setting.Error naming it", name, value, err)
		}
	}
	if _, err := config.IdemOptions(testsupport.Env(nil), 0); err == nil {
		t.Error("zero default result TTL accepted")
	}
}

// IDEM_MIN_REPLICAS, IDEM_REPLICA_TIMEOUT and IDEM_UNSAFE_EVICTION become options a guard
// accepts; a malformed value is a *setting.Error naming its variable.
func TestDurabilitySettingsNameTheirVariable(t *testing.T) {
	for _, vars := range []map[string]string{
		{"IDEM_MIN_REPLICAS": "2", "IDEM_UNSAFE_EVICTION": "refuse"},
		{"IDEM_MIN_REPLICAS": "1", "IDEM_REPLICA_TIMEOUT": "120ms"},
		{"IDEM_UNSAFE_EVICTION": "warn"},
		{"IDEM_MIN_REPLICAS": "0"},
	} {
		opts, err := config.IdemOptions(func(k string) string { return vars[k] }, time.Hour)
		if err != nil {
			t.Fatalf("%v: %v", vars, err)
		}
		if _, err := idem.New(testsupport.StartMiniredis(t).NewClient(), opts...); err != nil {
			t.Errorf("%v: the guard refuses the options: %v", vars, err)
		}
	}
	for _, tc := range []struct{ name, value string }{
		{"IDEM_MIN_REPLICAS", "-1"}, {"IDEM_MIN_REPLICAS", "6"}, {"IDEM_MIN_REPLICAS", "one"},
		{"IDEM_REPLICA_TIMEOUT", "0s"}, {"IDEM_REPLICA_TIMEOUT", "1s"}, {"IDEM_REPLICA_TIMEOUT", "50"},
		{"IDEM_UNSAFE_EVICTION", "fail"},
	} {
		vars := map[string]string{"IDEM_MIN_REPLICAS": "1", tc.name: tc.value}
		var se *setting.Error
		if _, err := config.IdemOptions(func(k string) string { return vars[k] }, time.Hour); !errors.As(err, &se) || se.Var != tc.name {
			t.Errorf("%s=%q: %v, want a *setting.Error naming it", tc.name, tc.value, err)
		}
	}
}
