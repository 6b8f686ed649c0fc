package redisconn

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/testsupport"
)

func TestSettingsFromEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Settings
	}{
		{
			name: "plain URL inside Lambda",
			env:  map[string]string{EnvURL: "redis://cache.example.com:6379/0", EnvRuntimeAPI: "127.0.0.1:9001"},
			want: Settings{URL: "redis://cache.example.com:6379/0"},
		},
		{
			name: "cluster with a secret and concurrency",
			env: map[string]string{
				EnvURL:            "rediss://clustercfg.cache.example.com:6379",
				EnvCluster:        "true",
				EnvAuthSecretARN:  "arn:aws:secretsmanager:us-east-1:123456789012:secret:redis-auth-AbCdEf",
				EnvMaxConcurrency: "8",
				EnvRuntimeAPI:     "127.0.0.1:9001",
			},
			want: Settings{
				URL:            "rediss://clustercfg.cache.example.com:6379",
				Cluster:        true,
				AuthSecretARN:  "arn:aws:secretsmanager:us-east-1:123456789012:secret:redis-auth-AbCdEf",
				MaxConcurrency: 8,
			},
		},
		{
			name: "serverless IAM auth, values trimmed, booleans in any ParseBool form",
			env: map[string]string{
				EnvURL:        " rediss://app-user@my-cache-abc123.serverless.use1.cache.amazonaws.com:6379 ",
				EnvCluster:    "TRUE",
				EnvIAMAuth:    "1",
				EnvCacheName:  "my-cache\n",
				EnvServerless: "True",
			},
			want: Settings{
				URL:        "rediss://app-user@my-cache-abc123.serverless.use1.cache.amazonaws.com:6379",
				Cluster:    true,
				IAMAuth:    true,
				CacheName:  "my-cache",
				Serverless: true,
			},
		},
		{
			name: "false booleans and unrelated IAM settings without IAM auth",
			env: map[string]string{
				EnvURL:        "redis://localhost:6380",
				EnvCluster:    "false",
				EnvIAMAuth:    "0",
				EnvCacheName:  "ignored",
				EnvServerless: "false",
			},
			want: Settings{URL: "redis://localhost:6380", CacheName: "ignored"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SettingsFromEnv(testsupport.Env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestSettingsFromEnvNamesTheBadVariable(t *testing.T) {
	const password = "s3cret-pa55"
	lambda := func(m map[string]string) map[string]string {
		m[EnvRuntimeAPI] = "127.0.0.1:9001"
		return m
	}
	iam := func(m map[string]string) map[string]string {
		base := map[string]string{EnvURL: "rediss://app-user@cache.example.com:6379", EnvIAMAuth: "true", EnvCacheName: "my-cache"}
		for k, v := range m {
			base[k] = v
		}
		return base
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantVar string
	}{
		{"no REDIS_URL", map[string]string{}, EnvURL},
		{"no REDIS_URL inside Lambda", lambda(map[string]string{}), EnvURL},
		{"blank REDIS_URL", map[string]string{EnvURL: "  "}, EnvURL},
		{"malformed REDIS_CLUSTER", map[string]string{EnvURL: "redis://h:6379", EnvCluster: "yes"}, EnvCluster},
		{"malformed REDIS_IAM_AUTH", map[string]string{EnvURL: "redis://h:6379", EnvIAMAuth: "on"}, EnvIAMAuth},
		{"malformed REDIS_CACHE_SERVERLESS", map[string]string{EnvURL: "redis://h:6379", EnvServerless: "serverless"}, EnvServerless},
		{"non-numeric AWS_LAMBDA_MAX_CONCURRENCY", map[string]string{EnvMaxConcurrency: "many"}, EnvMaxConcurrency},
		{"zero AWS_LAMBDA_MAX_CONCURRENCY", map[string]string{EnvMaxConcurrency: "0"}, EnvMaxConcurrency},
		{"negative AWS_LAMBDA_MAX_CONCURRENCY", map[string]string{EnvMaxConcurrency: "-2"}, EnvMaxConcurrency},
		{"URL with another scheme", map[string]string{EnvURL: "http://:" + password + "@h:6379"}, EnvURL},
		{"unix socket URL", map[string]string{EnvURL: "unix:///tmp/redis.sock"}, EnvURL},
		{"URL without scheme", map[string]string{EnvURL: "cache.example.com:6379"}, EnvURL},
		{"URL without host", map[string]string{EnvURL: "redis://:" + password + "@"}, EnvURL},
		{"unparsable URL", map[string]string{EnvURL: "redis://:" + password + "@h:port"}, EnvURL},
		{"URL with a bad database", map[string]string{EnvURL: "redis://:" + password + "@h:6379/zero"}, EnvURL},
		{"URL with an unknown option", map[string]string{EnvURL: "redis://:" + password + "@h:6379?colour=blue"}, EnvURL},
		{"URL with a malformed timeout", map[string]string{EnvURL: "redis://:" + password + "@h:6379?read_timeout=soon"}, EnvURL},
		{"cluster URL selecting a database", map[string]string{EnvURL: "redis://:" + password + "@h:6379/3", EnvCluster: "true"}, EnvURL},
		{"cluster URL with a bad seed", map[string]string{EnvURL: "redis://:" + password + "@h:6379?addr=nohostport", EnvCluster: "true"}, EnvURL},
		{"REDIS_CLUSTER without a URL", map[string]string{EnvCluster: "true"}, EnvURL},
		{"secret without a URL", map[string]string{EnvAuthSecretARN: "arn:x"}, EnvURL},
		{"IAM auth without a URL", map[string]string{EnvIAMAuth: "true", EnvCacheName: "c"}, EnvURL},
		{"secret and a URL password", map[string]string{EnvURL: "redis://:" + password + "@h:6379", EnvAuthSecretARN: "arn:x"}, EnvAuthSecretARN},
		{"IAM auth and a secret", iam(map[string]string{EnvAuthSecretARN: "arn:x"}), EnvIAMAuth},
		{"IAM auth and a URL password", iam(map[string]string{EnvURL: "rediss://app-user:" + password + "@h:6379"}), EnvIAMAuth},
		{"IAM auth without TLS", iam(map[string]string{EnvURL: "redis://app-user@h:6379"}), EnvURL},
		{"IAM auth without a user", iam(map[string]string{EnvURL: "rediss://h:6379"}), EnvURL},
		{"IAM auth without a cache name", iam(map[string]string{EnvCacheName: ""}), EnvCacheName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := SettingsFromEnv(testsupport.Env(tt.env))
			var se *setting.Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *setting.Error", err)
			}
			if se.Var != tt.wantVar {
				t.Errorf("Var = %q, want %q (err: %v)", se.Var, tt.wantVar, err)
			}
			if !strings.Contains(err.Error(), tt.wantVar) {
				t.Errorf("message %q does not name %s", err, tt.wantVar)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("message %q reveals the password", err)
			}
		})
	}
}

func TestValidateRejectsNegativeConcurrency(t *testing.T) {
	err := Settings{URL: "redis://127.0.0.1:6379", MaxConcurrency: -1}.Validate()
	var se *setting.Error
	if !errors.As(err, &se) || se.Var != EnvMaxConcurrency {
		t.Fatalf("err = %v, want a *setting.Error for %s", err, EnvMaxConcurrency)
	}
}
