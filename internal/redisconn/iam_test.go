package redisconn

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/setting"
)

// The SigV4 below is written from AWS's description of Signature Version 4, independently of
// the SDK's signer, so that the pinned tokens are checked rather than merely recorded.

// awsURIEncode is SigV4's UriEncode: every byte except A-Z a-z 0-9 - _ . ~ as %XX (upper hex).
func awsURIEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// canonicalQuery encodes params (one value each) sorted by encoded name.
func canonicalQuery(params map[string]string) string {
	var pairs []string
	for k, v := range params {
		pairs = append(pairs, awsURIEncode(k)+"="+awsURIEncode(v))
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "&")
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func sha256Hex(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:])
}

func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

// sigV4 returns the hex signature of a canonical request made of the given parts.
func sigV4(secret, amzDate, region, service, method, path, query, canonicalHeaders, signedHeaders, payloadHash string) string {
	canonicalRequest := strings.Join([]string{method, path, query, canonicalHeaders, signedHeaders, payloadHash}, "\n")
	scope := amzDate[:8] + "/" + region + "/" + service + "/aws4_request"
	stringToSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + sha256Hex(canonicalRequest)
	return hex.EncodeToString(hmacSHA256(signingKey(secret, amzDate[:8], region, service), stringToSign))
}

// TestHandWrittenSigV4MatchesAWSPublishedExamples anchors the test signer to numbers AWS
// publishes: the signing key example of the SigV4 documentation and the "get-vanilla" case of
// the SigV4 test suite.
func TestHandWrittenSigV4MatchesAWSPublishedExamples(t *testing.T) {
	key := hex.EncodeToString(signingKey(exampleSecretKey, "20120215", "us-east-1", "iam"))
	if want := "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"; key != want {
		t.Errorf("signing key = %s, want %s", key, want)
	}
	sig := sigV4(exampleSecretKey, "20150830T123600Z", "us-east-1", "service", "GET", "/", "",
		"host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n", "host;x-amz-date", sha256Hex(""))
	if want := "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"; sig != want {
		t.Errorf("get-vanilla signature = %s, want %s", sig, want)
	}
}

// verifyIAMToken parses token and checks every part of it, recomputing the signature.
func verifyIAMToken(t *testing.T, token, region, userID, cacheName string, serverless bool, sessionToken string, at time.Time) {
	t.Helper()
	if strings.Contains(token, "://") {
		t.Fatalf("token %q has a scheme", token)
	}
	hostPath, rawQuery, ok := strings.Cut(token, "?")
	if !ok || hostPath != cacheName+"/" {
		t.Fatalf("token %q does not start with %q", token, cacheName+"/?")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		t.Fatalf("token query: %v", err)
	}
	amzDate := at.UTC().Format("20060102T150405Z")
	want := map[string]string{
		"Action":              "connect",
		"User":                userID,
		"X-Amz-Algorithm":     "AWS4-HMAC-SHA256",
		"X-Amz-Credential":    exampleAccessKey + "/" + amzDate[:8] + "/" + region + "/elasticache/aws4_request",
		"X-Amz-Date":          amzDate,
		"X-Amz-Expires":       "900",
		"X-Amz-SignedHeaders": "host",
	}
	if serverless {
		want["ResourceType"] = "ServerlessCache"
	}
	if sessionToken != "" {
		want["X-Amz-Security-Token"] = sessionToken
	}
	signed := map[string]string{}
	for k, vs := range q {
		if len(vs) != 1 {
			t.Errorf("parameter %s has %d values", k, len(vs))
		}
		if k != "X-Amz-Signature" {
			signed[k] = vs[0]
		}
	}
	checkParams(t, signed, want)
	cq := canonicalQuery(signed)
	sig := sigV4(exampleSecretKey, amzDate, region, "elasticache", "GET", "/", cq, "host:"+cacheName+"\n", "host", sha256Hex(""))
	if got := q.Get("X-Amz-Signature"); got != sig {
		t.Errorf("X-Amz-Signature = %s, recomputed %s", got, sig)
	}
	// The token carries its query exactly in canonical form, signature last.
	if wantToken := cacheName + "/?" + cq + "&X-Amz-Signature=" + sig; token != wantToken {
		t.Errorf("token\n %s\nwant\n %s", token, wantToken)
	}
}

func TestIAMAuthTokenKnownAnswer(t *testing.T) {
	at := time.Date(2024, 3, 15, 12, 30, 45, 0, time.UTC)
	tests := []struct {
		name         string
		userID       string
		cacheName    string
		serverless   bool
		sessionToken string
		want         string
	}{
		{
			name:      "replication group",
			userID:    "iam-user-01",
			cacheName: "my-replication-group",
			want: "my-replication-group/?Action=connect&User=iam-user-01&X-Amz-Algorithm=AWS4-HMAC-SHA256" +
				"&X-Amz-Credential=AKIDEXAMPLE%2F20240315%2Fus-east-1%2Felasticache%2Faws4_request" +
				"&X-Amz-Date=20240315T123045Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host" +
				"&X-Amz-Signature=82e47b6bfccccf352fdfcf3b31796d4c75acaedcaf265d33b66ccfbda4985a92",
		},
		{
			name:         "serverless cache with session credentials",
			userID:       "iam-user-01",
			cacheName:    "my-serverless-cache",
			serverless:   true,
			sessionToken: "FwoGZXIvYXdzEXAMPLE/session+token=",
			want: "my-serverless-cache/?Action=connect&ResourceType=ServerlessCache&User=iam-user-01" +
				"&X-Amz-Algorithm=AWS4-HMAC-SHA256" +
				"&X-Amz-Credential=AKIDEXAMPLE%2F20240315%2Fus-east-1%2Felasticache%2Faws4_request" +
				"&X-Amz-Date=20240315T123045Z&X-Amz-Expires=900" +
				"&X-Amz-Security-Token=FwoGZXIvYXdzEXAMPLE%2Fsession%2Btoken%3D&X-Amz-SignedHeaders=host" +
				"&X-Amz-Signature=2271dc4661c68f83cabc09bd0c9380275a576151e24e3fbc26da4dc8f839e2a2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds := exampleCredentials(tt.sessionToken)
			token, err := IAMAuthToken(context.Background(), creds, "us-east-1", tt.userID, tt.cacheName, tt.serverless, at)
			if err != nil {
				t.Fatal(err)
			}
			if token != tt.want {
				t.Errorf("token\n %s\nwant\n %s", token, tt.want)
			}
			verifyIAMToken(t, token, "us-east-1", tt.userID, tt.cacheName, tt.serverless, tt.sessionToken, at)
		})
	}
}

func TestIAMAuthTokenRejectsMissingInputs(t *testing.T) {
	creds := exampleCredentials("")
	at := time.Unix(1700000000, 0)
	tests := []struct {
		name                      string
		creds                     aws.CredentialsProvider
		region, userID, cacheName string
	}{
		{"no credentials", nil, "us-east-1", "u", "c"},
		{"no region", creds, "", "u", "c"},
		{"no user", creds, "us-east-1", "", "c"},
		{"no cache name", creds, "us-east-1", "u", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := IAMAuthToken(context.Background(), tt.creds, tt.region, tt.userID, tt.cacheName, false, at)
			if !errors.Is(err, ErrIAMToken) {
				t.Fatalf("err = %v, want ErrIAMToken", err)
			}
		})
	}
}

func TestIAMTokenIsReusedForTenMinutesThenResigned(t *testing.T) {
	clock := &testClock{now: time.Date(2024, 3, 15, 12, 0, 0, 0, time.UTC)}
	creds := exampleCredentials("")
	tokens := &iamTokens{creds: creds, region: "eu-west-1", userID: "u1", cacheName: "c1", now: clock.Now}
	ctx := context.Background()

	user, first, err := tokens.credentials(ctx)
	if err != nil || user != "u1" {
		t.Fatalf("credentials() = %q, %v", user, err)
	}
	clock.Advance(IAMTokenRefresh - time.Second)
	if _, again, _ := tokens.credentials(ctx); again != first {
		t.Error("token re-signed before IAMTokenRefresh")
	}
	if n := creds.calls.Load(); n != 1 {
		t.Errorf("credentials retrieved %d times, want 1", n)
	}
	clock.Advance(time.Second)
	_, second, err := tokens.credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Error("token not re-signed after IAMTokenRefresh")
	}
	verifyIAMToken(t, second, "eu-west-1", "u1", "c1", false, "", clock.Now())
}

func TestIAMTokenIsResignedBeforeCredentialsExpire(t *testing.T) {
	clock := &testClock{now: time.Date(2024, 3, 15, 12, 0, 0, 0, time.UTC)}
	creds := exampleCredentials("session")
	creds.creds.CanExpire = true
	creds.creds.Expires = clock.Now().Add(3 * time.Minute)
	tokens := &iamTokens{creds: creds, region: "eu-west-1", userID: "u1", cacheName: "c1", now: clock.Now}
	ctx := context.Background()

	_, first, _ := tokens.credentials(ctx)
	clock.Advance(3*time.Minute - credentialsMargin)
	if _, second, _ := tokens.credentials(ctx); second == first {
		t.Error("token reused although its credentials expire within the margin")
	}
}

// TestIAMAuthSendsUserAndTokenOnEveryNewConnection runs a real go-redis client against a TLS
// miniredis that accepts exactly one user/password pair, the token the fixed clock implies.
func TestIAMAuthSendsUserAndTokenOnEveryNewConnection(t *testing.T) {
	pki := newTestPKI(t)
	m := miniredis.NewMiniRedis()
	if err := m.StartTLS(pki.serverTLSConfig()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)

	const region, userID, cacheName = "us-east-1", "iam-user-01", "my-replication-group"
	clock := &testClock{now: time.Date(2024, 3, 15, 12, 0, 0, 0, time.UTC)}
	creds := exampleCredentials("")
	tokenAt := func(at time.Time) string {
		tok, err := IAMAuthToken(context.Background(), exampleCredentials(""), region, userID, cacheName, false, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	m.RequireUserAuth(userID, tokenAt(clock.Now()))

	s := Settings{URL: "rediss://" + userID + "@" + m.Addr(), IAMAuth: true, CacheName: cacheName}
	c, err := Open(context.Background(), s, WithCredentials(creds), WithRegion(region), WithClock(clock.Now), WithRootCAs(pki.roots))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()

	// newConn pins a fresh pooled connection: earlier ones stay held, so each call dials.
	var held []*redis.Conn
	t.Cleanup(func() {
		for _, h := range held {
			h.Close()
		}
	})
	newConn := func() error {
		h := c.Client.(*redis.Client).Conn()
		held = append(held, h)
		return h.Ping(ctx).Err()
	}

	if err := newConn(); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	clock.Advance(5 * time.Minute)
	if err := newConn(); err != nil {
		t.Fatalf("connection after 5 minutes (cached token): %v", err)
	}
	if n := creds.calls.Load(); n != 1 {
		t.Errorf("credentials retrieved %d times for two connections within the refresh period, want 1", n)
	}

	clock.Advance(6 * time.Minute)
	m.RequireUserAuth(userID, tokenAt(clock.Now()))
	if err := newConn(); err != nil {
		t.Fatalf("connection after 11 minutes (fresh token): %v", err)
	}
	if n := creds.calls.Load(); n != 2 {
		t.Errorf("credentials retrieved %d times, want 2 after the refresh period", n)
	}
	// Connections authenticated earlier stay usable.
	for i, h := range held {
		if err := h.Ping(ctx).Err(); err != nil {
			t.Errorf("held connection %d: %v", i, err)
		}
	}

	// The server really checks: with a password the client cannot know, a new connection fails.
	m.RequireUserAuth(userID, "something-else")
	if err := newConn(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("connection with a stale token: err = %v, want WRONGPASS", err)
	}
}

func TestOpenWithIAMAuthConfiguresEveryClientKind(t *testing.T) {
	s := Settings{URL: "rediss://iam-user-01@cache.example.com:6379", IAMAuth: true, CacheName: "my-cache"}
	opts := []Option{WithCredentials(exampleCredentials("")), WithRegion("us-east-1")}

	o := singleOptions(t, mustOpen(t, s, opts...))
	if o.CredentialsProviderContext == nil || o.ConnMaxLifetime != IAMConnMaxLifetime || o.Password != "" {
		t.Errorf("client: provider set %v, ConnMaxLifetime %v, password %q", o.CredentialsProviderContext != nil, o.ConnMaxLifetime, o.Password)
	}
	if user, token, err := o.CredentialsProviderContext(context.Background()); err != nil || user != "iam-user-01" || !strings.HasPrefix(token, "my-cache/?Action=connect&User=iam-user-01&") {
		t.Errorf("provider = %q, %q, %v", user, token, err)
	}

	s.Cluster, s.Serverless = true, true
	co := mustOpen(t, s, opts...).Client.(*redis.ClusterClient).Options()
	if co.CredentialsProviderContext == nil || co.ConnMaxLifetime != IAMConnMaxLifetime {
		t.Fatalf("cluster client: provider set %v, ConnMaxLifetime %v", co.CredentialsProviderContext != nil, co.ConnMaxLifetime)
	}
	if _, token, err := co.CredentialsProviderContext(context.Background()); err != nil || !strings.Contains(token, "&ResourceType=ServerlessCache&") {
		t.Errorf("serverless token = %q, %v", token, err)
	}
}

type failingCredentials struct{}

func (failingCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, errors.New("no credentials in this environment")
}

func TestOpenWithIAMAuthFailsAtInitWithoutRegionOrCredentials(t *testing.T) {
	s := Settings{URL: "rediss://iam-user-01@cache.example.com:6379", IAMAuth: true, CacheName: "my-cache"}
	tests := []struct {
		name    string
		opts    []Option
		wantVar string
	}{
		{"no region", []Option{WithAWSConfig(aws.Config{Credentials: exampleCredentials("")})}, EnvRegion},
		{"no credentials provider", []Option{WithAWSConfig(aws.Config{Region: "us-east-1"})}, EnvIAMAuth},
		{"credentials cannot be retrieved", []Option{WithAWSConfig(aws.Config{Region: "us-east-1", Credentials: failingCredentials{}})}, EnvIAMAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(context.Background(), s, tt.opts...)
			var se *setting.Error
			if !errors.As(err, &se) || se.Var != tt.wantVar {
				t.Fatalf("err = %v, want a *setting.Error for %s", err, tt.wantVar)
			}
		})
	}
}

// checkParams checks that the token's signed parameters are exactly want.
func checkParams(t *testing.T, signed, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if signed[k] != v {
			t.Errorf("%s = %q, want %q", k, signed[k], v)
		}
	}
	for k := range signed {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected parameter %s", k)
		}
	}
}
