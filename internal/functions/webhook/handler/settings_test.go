package handler

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemlambda/idem/internal/preset"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/webhook"
)

func TestSettingsErrorsNameTheVariable(t *testing.T) {
	base := map[string]string{EnvProvider: "stripe", EnvSecret: "whsec_test", "REDIS_URL": "redis://" + testsupport.ClosedAddr(t)}
	lambda := map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}
	cases := []struct {
		name string
		set  map[string]string
		drop []string
		want string
		own  bool // a *setting.Error
	}{
		{"missing provider", nil, []string{EnvProvider}, EnvProvider, true},
		{"unknown provider", map[string]string{EnvProvider: "paypal"}, nil, EnvProvider, true},
		{"tolerance not a duration", map[string]string{EnvTolerance: "5 minutes"}, nil, EnvTolerance, true},
		{"negative tolerance", map[string]string{EnvTolerance: "-5m"}, nil, EnvTolerance, true},
		{"zero tolerance", map[string]string{EnvTolerance: "0s"}, nil, EnvTolerance, true},
		{"tolerance as long as the retention", map[string]string{EnvTolerance: "96h"}, nil, EnvTolerance, true},
		{"hmac without its header", map[string]string{EnvProvider: "hmac"}, nil, "WEBHOOK_HMAC_HEADER", true},
		{"body limit with a unit", map[string]string{EnvMaxBody: "1MB"}, nil, EnvMaxBody, true},
		{"body limit over Lambda's", map[string]string{EnvMaxBody: "7340032"}, nil, EnvMaxBody, true},
		{"log level", map[string]string{"LOG_LEVEL": "loud"}, nil, "LOG_LEVEL", true},
		{"no secret inside Lambda", lambda, []string{EnvSecret}, EnvSecret, true},
		{"only commas", map[string]string{EnvSecret: " , ,"}, nil, EnvSecret, true},
		{"secret and secret ARN", map[string]string{EnvSecretARN: "arn:aws:secretsmanager:us-east-1:123456789012:secret:s"}, nil, EnvSecret, true},
		{"standard secret not base64", map[string]string{EnvProvider: "standard", EnvSecret: "whsec_not*base64!"}, nil, EnvSecret, true},
		{"result TTL", map[string]string{"IDEM_RESULT_TTL": "forever"}, nil, "IDEM_RESULT_TTL", false},
		{"key prefix", map[string]string{"IDEM_KEY_PREFIX": "has space"}, nil, "IDEM_", false},
		{"sink", map[string]string{"WEBHOOK_SINK": "pigeon"}, nil, "WEBHOOK_SINK", false},
		{"queue", map[string]string{"WEBHOOK_SINK": "sqs"}, nil, "WEBHOOK_QUEUE_URL", false},
		{"redis url", map[string]string{"REDIS_URL": "http://cache:6379"}, nil, "REDIS_URL", true},
		{"no redis inside Lambda", lambda, []string{"REDIS_URL"}, "REDIS_URL", true},
		{"no redis outside Lambda", nil, []string{"REDIS_URL"}, "REDIS_URL", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vars := maps.Clone(base)
			maps.Copy(vars, tc.set)
			for _, k := range tc.drop {
				delete(vars, k)
			}
			h, err := New(context.Background(), env(vars), WithLogOutput(io.Discard))
			if err == nil {
				h.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
			var se *setting.Error
			if tc.own && (!errors.As(err, &se) || se.Var != tc.want) {
				t.Errorf("error %q is not a *setting.Error for %s", err, tc.want)
			}
			if s := vars[EnvSecret]; s != "" && strings.Contains(err.Error(), s) {
				t.Errorf("error %q holds the secret", err)
			}
		})
	}
}

func TestInitInsideLambdaNeedsNoReachableRedis(t *testing.T) {
	vars := map[string]string{
		"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001",
		EnvProvider:              "github",
		EnvSecret:                "s3cr3t",
		"REDIS_URL":              "redis://" + testsupport.ClosedAddr(t),
	}
	h, err := New(context.Background(), env(vars), WithLogOutput(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
}

func TestDevelopmentSecretOutsideLambda(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		secret := webhook.DevSecret(pc.name)
		if pc.name == "standard" {
			if _, err := preset.DecodeWhsec(secret); err != nil {
				t.Fatalf("webhook.DevSecret(standard) = %q: %v", secret, err)
			}
		}
		hs := newHarness(t, pc.name, harnessConfig{env: map[string]string{EnvSecret: ""}})
		init := hs.logs.lines(t, "")
		if len(init) == 0 || init[0]["level"] != "WARN" || init[0]["dev_secret"] != secret {
			t.Errorf("init does not announce the development secret: %v", init)
		}
		d := sampleDelivery(t, pc.name, pc.eventID("dev"))
		wantReceipt(t, hs.do(t, d.signed(t, secret, fixedNow)), pc.eventID("dev"))
		wantStatus(t, hs.do(t, d.signed(t, testSecret(pc.name), fixedNow)), 401, "invalid_signature")
	})
}

// secretID is what the tests read of a GetSecretValue input.
type secretID struct{ SecretId string }

// newFakeSecretsManager starts a fake Secrets Manager whose GetSecretValue answers with
// secrets (SecretId to SecretString), or ResourceNotFoundException.
func newFakeSecretsManager(t *testing.T, secrets map[string]string) *testsupport.FakeAWS {
	return testsupport.StartFakeAWS(t, testsupport.AWSJSON11, func(r testsupport.AWSRequest) (int, any) {
		var in secretID
		_ = json.Unmarshal(r.Body, &in)
		value, ok := secrets[in.SecretId]
		if !ok {
			return http.StatusBadRequest, `{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret."}`
		}
		return http.StatusOK, map[string]any{
			"ARN": in.SecretId, "Name": "webhook", "SecretString": value,
			"VersionId": "8f1d2a7e-5b3c-4e6f-9a0b-1c2d3e4f5a6b", "VersionStages": []string{"AWSCURRENT"},
			"CreatedDate": 1.7723664e9,
		}
	})
}

func TestSecretFromSecretsManagerIsReadOnceAtInit(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:webhook-github-AbCdEf"
	fake := newFakeSecretsManager(t, map[string]string{arn: "old-github-secret, new-github-secret\n"})
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", fake.URL)

	testsupport.SharedRedis(t)
	vars := map[string]string{EnvProvider: "github", EnvSecretARN: arn, "IDEM_KEY_PREFIX": keyPrefix(t), "REDIS_URL": "redis://" + testsupport.SharedRedisAddr()}
	snk := &recordingSink{}
	logs := &logBuffer{}
	h, err := New(context.Background(), env(vars), WithSink(snk), WithLogOutput(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	for i, secret := range []string{"old-github-secret", "new-github-secret", "old-github-secret"} {
		d := sampleDelivery(t, "github", "7d0e2a4b-secrets-"+string(rune('a'+i)))
		resp, _ := invoke(h, d.signed(t, secret, time.Now()))
		wantStatus(t, resp, 200, "")
	}
	d := sampleDelivery(t, "github", "7d0e2a4b-secrets-x")
	resp, _ := invoke(h, d.signed(t, "another-secret", time.Now()))
	wantStatus(t, resp, 401, "invalid_signature")

	calls := testsupport.Calls[secretID](t, fake)
	if len(calls) != 1 || calls[0].Input.SecretId != arn || calls[0].Target != "secretsmanager.GetSecretValue" {
		t.Errorf("Secrets Manager calls %+v, want one GetSecretValue of %s", calls, arn)
	}
	if strings.Contains(logs.String(), "github-secret") {
		t.Error("a secret appears in the logs")
	}
}

func TestUnusableSecretsManagerSecretFailsInit(t *testing.T) {
	const (
		jsonARN    = "arn:aws:secretsmanager:us-east-1:123456789012:secret:kv-AbCdEf"
		emptyARN   = "arn:aws:secretsmanager:us-east-1:123456789012:secret:empty-AbCdEf"
		missingARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gone-AbCdEf"
	)
	fake := newFakeSecretsManager(t, map[string]string{jsonARN: `{"secret":"s3cr3t-value"}`, emptyARN: " \n"})
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", fake.URL)

	for _, arn := range []string{jsonARN, emptyARN, missingARN} {
		vars := map[string]string{EnvProvider: "slack", EnvSecretARN: arn, "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "REDIS_URL": "redis://127.0.0.1:1"}
		_, err := New(context.Background(), env(vars), WithLogOutput(io.Discard))
		var se *setting.Error
		if !errors.As(err, &se) || se.Var != EnvSecretARN {
			t.Errorf("%s: error %v, want a *setting.Error for %s", arn, err, EnvSecretARN)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t-value") {
			t.Errorf("error %q holds the secret", err)
		}
	}
}
