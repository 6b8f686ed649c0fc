package redisconn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	// IAMTokenLifetime is how long ElastiCache accepts an IAM auth token after it is signed
	// (its X-Amz-Expires).
	IAMTokenLifetime = 15 * time.Minute
	// IAMTokenRefresh is how long Open's credentials provider reuses one token for new
	// connections before signing another, leaving a margin before IAMTokenLifetime ends.
	IAMTokenRefresh = 10 * time.Minute

	iamService = "elasticache"
	// emptyPayloadHash is the hex SHA-256 of an empty body, which the token's GET request has.
	emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// ErrIAMToken is wrapped by every error IAMAuthToken returns.
var ErrIAMToken = errors.New("redisconn: cannot make IAM auth token")

// IAMAuthToken returns an ElastiCache IAM authentication token: the password to send, with
// userID as the username, in AUTH or HELLO. It is the SigV4-presigned URL (service
// "elasticache", X-Amz-Expires 900 seconds, signed at now) of
//
//	GET http://<cacheName>/?Action=connect&User=<userID>[&ResourceType=ServerlessCache]
//
// without its "http://" scheme, as AWS's ElastiCache sample code builds it. cacheName is the
// replication group id or, with serverless true, the serverless cache name. Temporary
// credentials (Lambda's) add X-Amz-Security-Token. The token is valid for IAMTokenLifetime
// after now, and no longer than the credentials are. Signing is local: the only I/O is
// whatever creds.Retrieve does.
func IAMAuthToken(ctx context.Context, creds aws.CredentialsProvider, region, userID, cacheName string, serverless bool, now time.Time) (string, error) {
	if creds == nil {
		return "", fmt.Errorf("%w: no AWS credentials provider", ErrIAMToken)
	}
	c, err := creds.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: retrieve AWS credentials: %w", ErrIAMToken, err)
	}
	return signIAMToken(ctx, c, region, userID, cacheName, serverless, now)
}

func signIAMToken(ctx context.Context, c aws.Credentials, region, userID, cacheName string, serverless bool, now time.Time) (string, error) {
	switch {
	case region == "":
		return "", fmt.Errorf("%w: empty region", ErrIAMToken)
	case userID == "":
		return "", fmt.Errorf("%w: empty user id", ErrIAMToken)
	case cacheName == "":
		return "", fmt.Errorf("%w: empty cache name", ErrIAMToken)
	}
	q := url.Values{}
	q.Set("Action", "connect")
	q.Set("User", userID)
	if serverless {
		q.Set("ResourceType", "ServerlessCache")
	}
	q.Set("X-Amz-Expires", strconv.Itoa(int(IAMTokenLifetime/time.Second)))
	u := url.URL{Scheme: "http", Host: cacheName, Path: "/", RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("%w: cache name %q: %w", ErrIAMToken, cacheName, err)
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, c, req, emptyPayloadHash, iamService, region, now)
	if err != nil {
		return "", fmt.Errorf("%w: sign: %w", ErrIAMToken, err)
	}
	return strings.TrimPrefix(signed, "http://"), nil
}

// iamTokens hands out IAM auth tokens to new connections, signing a new one when the cached
// one is IAMTokenRefresh old or its credentials are about to expire.
type iamTokens struct {
	creds      aws.CredentialsProvider
	region     string
	userID     string
	cacheName  string
	serverless bool
	now        func() time.Time

	mu       sync.Mutex
	token    string
	signedAt time.Time
	reuseTil time.Time
}

// credentialsMargin is how long before its credentials expire a token stops being reused.
const credentialsMargin = time.Minute

// credentials is a go-redis CredentialsProviderContext.
func (t *iamTokens) credentials(ctx context.Context) (username, password string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	// A clock that went backwards (a thawed environment, a test clock) also means re-sign.
	if t.token != "" && !now.Before(t.signedAt) && now.Before(t.reuseTil) {
		return t.userID, t.token, nil
	}
	c, err := t.creds.Retrieve(ctx)
	if err != nil {
		return "", "", fmt.Errorf("%w: retrieve AWS credentials: %w", ErrIAMToken, err)
	}
	token, err := signIAMToken(ctx, c, t.region, t.userID, t.cacheName, t.serverless, now)
	if err != nil {
		return "", "", err
	}
	t.token, t.signedAt, t.reuseTil = token, now, now.Add(IAMTokenRefresh)
	if c.CanExpire && c.Expires.Add(-credentialsMargin).Before(t.reuseTil) {
		t.reuseTil = c.Expires.Add(-credentialsMargin)
	}
	return t.userID, t.token, nil
}
