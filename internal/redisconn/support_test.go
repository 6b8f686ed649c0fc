package redisconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/redis/go-redis/v9"
)

// Test fixtures shared by the files of this package. Servers that outlive one file's needs
// belong in internal/testsupport; these are small enough to stay next to the tests that use them.

func TestMain(m *testing.M) {
	// Several tests make go-redis fail to dial on purpose; its log lines about that are noise.
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

const (
	exampleAccessKey = "AKIDEXAMPLE"
	exampleSecretKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

// testClock is a settable clock for WithClock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// countingCredentials is a static credentials provider that counts Retrieve calls.
type countingCredentials struct {
	creds aws.Credentials
	calls atomic.Int32
}

func (c *countingCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	c.calls.Add(1)
	return c.creds, nil
}

func exampleCredentials(sessionToken string) *countingCredentials {
	return &countingCredentials{creds: aws.Credentials{
		AccessKeyID:     exampleAccessKey,
		SecretAccessKey: exampleSecretKey,
		SessionToken:    sessionToken,
		Source:          "test",
	}}
}

// testPKI is a throwaway CA and a server certificate it signed for 127.0.0.1 and localhost.
type testPKI struct {
	roots      *x509.CertPool
	serverCert tls.Certificate
	caPEM      []byte
	certPEM    []byte
	keyPEM     []byte
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	now := time.Now()
	ca, caKey := issue(t, &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redisconn test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil)
	srv, srvKey := issue(t, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}, ca, caKey)
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{
		roots:   x509.NewCertPool(),
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Raw}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	p.roots.AddCert(ca)
	if p.serverCert, err = tls.X509KeyPair(p.certPEM, p.keyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue makes a new key and a certificate for it from tmpl, signed by parent with parentKey,
// or by itself when parent is nil.
func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// serverTLSConfig is a TLS config for a test server presenting the certificate.
func (p *testPKI) serverTLSConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.serverCert}, MinVersion: tls.VersionTLS12}
}

// unavailable stops a test that needs something this machine lacks: it fails when the CI
// environment variable is set, so a broken CI image cannot pass by testing nothing, and skips
// otherwise.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format+" (CI is set, so this fails instead of skipping)", args...)
	}
	t.Skipf(format+" (skipped; set CI=1 to make this a failure)", args...)
}
