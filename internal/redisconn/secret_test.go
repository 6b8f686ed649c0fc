package redisconn

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/setting"
)

const testSecretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:redis-auth-AbCdEf"

// fakeSecretsManager speaks the Secrets Manager JSON protocol (awsJson1_1) for
// GetSecretValue, serving secrets by SecretId and ResourceNotFoundException otherwise.
type fakeSecretsManager struct {
	*httptest.Server
	secrets map[string]string
	calls   atomic.Int32
}

func newFakeSecretsManager(t *testing.T, secrets map[string]string) *fakeSecretsManager {
	t.Helper()
	f := &fakeSecretsManager{secrets: secrets}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
			t.Errorf("request %s with X-Amz-Target %q, want POST secretsmanager.GetSecretValue", r.Method, r.Header.Get("X-Amz-Target"))
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
			t.Errorf("Content-Type = %q", ct)
		}
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+exampleAccessKey+"/") {
			t.Errorf("request not signed with the test credentials: %q", r.Header.Get("Authorization"))
		}
		var in struct {
			SecretID string `json:"SecretId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			t.Errorf("request body: %v", err)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		v, ok := f.secrets[in.SecretID]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{
				"__type":  "ResourceNotFoundException",
				"message": "Secrets Manager can't find the specified secret.",
			})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"ARN":          in.SecretID,
			"Name":         "redis-auth",
			"SecretString": v,
			"VersionId":    "v1",
		})
	}))
	t.Cleanup(f.Close)
	return f
}

// client is a Secrets Manager client pointed at the fake with the SDK's BaseEndpoint.
func (f *fakeSecretsManager) client() *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		BaseEndpoint: aws.String(f.URL),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(exampleAccessKey, exampleSecretKey, ""),
	})
}

func TestPasswordFromSecretsManager(t *testing.T) {
	tests := []struct {
		name     string
		secret   string
		urlUser  string
		wantUser string
		wantPass string
	}{
		{"plain string", "plain-pa55word", "", "default", "plain-pa55word"},
		{"plain string with trailing newline", "plain-pa55word\n", "", "default", "plain-pa55word"},
		{"plain string with the URL's user", "app-pa55word", "app", "app", "app-pa55word"},
		{"JSON password", `{"password": "json-pa55word"}`, "", "default", "json-pa55word"},
		{"JSON username and password", `{"username": "app", "password": "json-pa55word", "user_arn": "arn:aws:elasticache:..."}`, "other", "app", "json-pa55word"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := miniredis.RunT(t)
			m.RequireUserAuth(tt.wantUser, tt.wantPass)
			sm := newFakeSecretsManager(t, map[string]string{testSecretARN: tt.secret})
			url := "redis://" + m.Addr()
			if tt.urlUser != "" {
				url = "redis://" + tt.urlUser + "@" + m.Addr()
			}
			c := mustOpen(t, Settings{URL: url, AuthSecretARN: testSecretARN}, WithSecretsClient(sm.client()))
			if err := c.Client.Ping(context.Background()).Err(); err != nil {
				t.Fatalf("Ping: %v", err)
			}
			if n := sm.calls.Load(); n != 1 {
				t.Errorf("Secrets Manager called %d times, want 1", n)
			}
		})
	}
}

func TestSecretsManagerEndpointFromStandardEnvironment(t *testing.T) {
	sm := newFakeSecretsManager(t, map[string]string{testSecretARN: "env-pa55word"})
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sm.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", exampleAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", exampleSecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")

	m := miniredis.RunT(t)
	m.RequireAuth("env-pa55word")
	c := mustOpen(t, Settings{URL: "redis://" + m.Addr(), AuthSecretARN: testSecretARN})
	if err := c.Client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if n := sm.calls.Load(); n != 1 {
		t.Errorf("Secrets Manager called %d times, want 1", n)
	}
}

func TestUnusableSecretFailsOpenNamingTheVariable(t *testing.T) {
	const leaked = "do-not-print-me"
	sm := newFakeSecretsManager(t, map[string]string{
		"empty":          "  \n",
		"no-password":    `{"username": "app"}`,
		"number":         `{"password": 12345}`,
		"broken-json":    `{"password": "` + leaked,
		"empty-password": `{"password": ""}`,
	})
	for _, id := range []string{"missing", "empty", "no-password", "number", "broken-json", "empty-password"} {
		t.Run(id, func(t *testing.T) {
			_, err := Open(context.Background(), Settings{URL: "redis://127.0.0.1:1", AuthSecretARN: id}, WithSecretsClient(sm.client()))
			var se *setting.Error
			if !errors.As(err, &se) || se.Var != EnvAuthSecretARN {
				t.Fatalf("err = %v, want a *setting.Error for %s", err, EnvAuthSecretARN)
			}
			if strings.Contains(err.Error(), leaked) {
				t.Errorf("message %q reveals the secret", err)
			}
			if id == "missing" {
				var nf *types.ResourceNotFoundException
				if !errors.As(err, &nf) {
					t.Errorf("err = %v, want it to wrap ResourceNotFoundException", err)
				}
			}
		})
	}
}

func TestSecretCredentialsReachTheClusterClientToo(t *testing.T) {
	sm := newFakeSecretsManager(t, map[string]string{testSecretARN: `{"username": "app", "password": "cluster-pa55word"}`})
	s := Settings{URL: "rediss://clustercfg.cache.example.com:6379", Cluster: true, AuthSecretARN: testSecretARN}
	co := mustOpen(t, s, WithSecretsClient(sm.client())).Client.(*redis.ClusterClient).Options()
	if co.Username != "app" || co.Password != "cluster-pa55word" || co.CredentialsProviderContext != nil {
		t.Errorf("cluster client: username %q, password set %v, provider set %v", co.Username, co.Password != "", co.CredentialsProviderContext != nil)
	}
}
