package redisconn

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
)

// startTLSRedisServer starts a private redis-server that serves only TLS, with the test PKI's
// certificate and requirepass password, and returns its loopback address. It stops the test
// through unavailable when redis-server is missing or was built without TLS.
func startTLSRedisServer(t *testing.T, pki *testPKI, password string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server not found on PATH: %v", err)
	}
	dir := t.TempDir()
	files := map[string][]byte{"ca.pem": pki.caPEM, "cert.pem": pki.certPEM, "key.pem": pki.keyPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var lastOut string
	for range 3 { // the free port may be taken before redis-server binds it
		port := testsupport.ClosedAddr(t)
		_, p, _ := net.SplitHostPort(port)
		cmd := exec.Command(bin,
			"--port", "0",
			"--tls-port", p,
			"--bind", "127.0.0.1",
			"--tls-cert-file", filepath.Join(dir, "cert.pem"),
			"--tls-key-file", filepath.Join(dir, "key.pem"),
			"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"),
			"--tls-auth-clients", "no",
			"--requirepass", password,
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
		)
		out := &testsupport.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		if waitListening(port, exited, 5*time.Second) {
			t.Cleanup(stop)
			return port
		}
		stop()
		lastOut = out.String()
		if tlsUnsupported(lastOut) {
			unavailable(t, "redis-server at %s was built without TLS support: %s", bin, lastOut)
		}
	}
	t.Fatalf("redis-server with TLS did not start: %s", lastOut)
	return ""
}

// tlsUnsupported recognises the start-up failure of a redis-server built without TLS.
func tlsUnsupported(out string) bool {
	out = strings.ToLower(out)
	return strings.Contains(out, "tls") && (strings.Contains(out, "not supported") ||
		strings.Contains(out, "not compiled") || strings.Contains(out, "bad directive"))
}

func waitListening(addr string, exited <-chan struct{}, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func TestRedissAgainstRealRedisServerWithTLS(t *testing.T) {
	pki := newTestPKI(t)
	const password = "tls-pa55word"
	addr := startTLSRedisServer(t, pki, password)
	_, port, _ := net.SplitHostPort(addr)
	ctx := context.Background()

	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run("verified "+host, func(t *testing.T) {
			c := mustOpen(t, Settings{URL: "rediss://:" + password + "@" + net.JoinHostPort(host, port)}, WithRootCAs(pki.roots))
			if err := c.Client.Set(ctx, "redisconn:tls", "ok", time.Minute).Err(); err != nil {
				t.Fatalf("SET over TLS: %v", err)
			}
			if v, err := c.Client.Get(ctx, "redisconn:tls").Result(); err != nil || v != "ok" {
				t.Fatalf("GET over TLS = %q, %v", v, err)
			}
			c.Client.Del(ctx, "redisconn:tls")
		})
	}

	t.Run("unknown CA is refused", func(t *testing.T) {
		c := mustOpen(t, Settings{URL: "rediss://:" + password + "@" + addr})
		err := c.Client.Ping(ctx).Err()
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("Ping err = %v, want x509.UnknownAuthorityError", err)
		}
	})

	t.Run("plain redis:// to the TLS port fails", func(t *testing.T) {
		c := mustOpen(t, Settings{URL: "redis://:" + password + "@" + addr})
		if err := c.Client.Ping(ctx).Err(); err == nil {
			t.Fatal("plain-text PING to a TLS port succeeded")
		}
	})

	t.Run("cluster client over TLS", func(t *testing.T) {
		// redis-server here is not in cluster mode; the client must still reach it over TLS
		// and report the server's refusal of CLUSTER SLOTS rather than a TLS error.
		c := mustOpen(t, Settings{URL: "rediss://:" + password + "@" + addr, Cluster: true}, WithRootCAs(pki.roots))
		err := c.Client.Ping(ctx).Err()
		if err == nil || !strings.Contains(err.Error(), "cluster") {
			t.Fatalf("Ping err = %v, want the server's cluster-support error", err)
		}
	})
}
