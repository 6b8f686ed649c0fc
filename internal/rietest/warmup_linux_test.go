//go:build linux

package rietest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/samples"
	"github.com/idemlambda/idem/internal/testsupport"
)

// tlsRedis is a private redis-server serving TLS (as ElastiCache does) with a password, and
// the CA file that makes its certificate trusted (SSL_CERT_FILE for the function).
type tlsRedis struct {
	url    string        // rediss:// URL with the password, for the function
	caFile string        // PEM of the CA that signed the server's certificate
	admin  *redis.Client // on the plain port, for the test's own checks
}

// startTLSRedis starts redis-server with a TLS port besides its plain one, a certificate for
// 127.0.0.1 signed by a CA made here, and requirepass.
func startTLSRedis(t *testing.T) tlsRedis {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rietest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"ca.pem":   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"cert.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		"key.pem":  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const password = "rietest-tls-pa55"
	tlsPort := strconv.Itoa(freePort(t))
	srv := testsupport.StartRedis(t,
		"--tls-port", tlsPort,
		"--tls-cert-file", filepath.Join(dir, "cert.pem"),
		"--tls-key-file", filepath.Join(dir, "key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"),
		"--tls-auth-clients", "no",
		"--requirepass", password)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: password})
	t.Cleanup(func() { admin.Close() })
	if err := admin.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis-server with TLS: %v", err)
	}
	return tlsRedis{
		url:    "rediss://:" + password + "@127.0.0.1:" + tlsPort,
		caFile: filepath.Join(dir, "ca.pem"),
		admin:  admin,
	}
}

// stat reads one field of INFO section.
func (r tlsRedis) stat(t *testing.T, section, field string) int {
	t.Helper()
	info, err := r.admin.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("INFO %s %s: %q", section, field, v)
			}
			return n
		}
	}
	return 0
}

// commandCalls returns the calls of a command in INFO commandstats (0 when never called).
func (r tlsRedis) commandCalls(t *testing.T, cmd string) int {
	t.Helper()
	info, err := r.admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(v, ",", 2)[0])
			return n
		}
	}
	return 0
}

// settled reads a server counter, through read, until it reaches want or relayBound passes,
// and returns the value last read: a count above want is returned at once, a count below it
// only once the bound has passed, so a check of the exact value neither fails on an update
// still on its way nor waits for one that will not come.
func settled(read func() int, want int) int {
	var n int
	eventually(func() bool { n = read(); return n >= want })
	return n
}

// durations returns the duration_ms of the function's request log lines, in order.
func durations(t *testing.T, output string) []float64 {
	t.Helper()
	var out []float64
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Outcome  string   `json:"outcome"`
			Duration *float64 `json:"duration_ms"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Outcome != "" && line.Duration != nil {
			out = append(out, *line.Duration)
		}
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// The function's init makes its Redis connection (TCP, TLS, AUTH) and primes the request's code
// with one synthetic payment (Handler.Prime), so the first request finds the connection ready
// and the scripts compiled: machine-independent facts, checked on the server's counters. How
// long the first request takes next to a warm first delivery is measured and logged, not
// asserted (docs/operations.md has the figure).
//
//cyclo:one round per execution environment, each checking the server counters of init and its six requests in order
func TestFirstRequestAfterInitFindsTheTLSConnectionReady(t *testing.T) {
	tpl, all, bins := setup(t)
	r := startTLSRedis(t)
	f, ok := tpl.Function("PaymentsFunction")
	if !ok {
		t.Fatal("no PaymentsFunction in the template")
	}
	var create samples.Sample
	for _, s := range all {
		if s.File == "payments-create.json" {
			create = s
		}
	}
	if create.File == "" {
		t.Fatal("no payments-create.json sample")
	}
	const rounds = 15
	var firsts, warms []float64
	for round := range rounds {
		env := lambdaEnv(f, strings.TrimSuffix(testsupport.UniquePrefix(t), ":"))
		env["REDIS_URL"] = r.url
		env["SSL_CERT_FILE"] = r.caFile // Go's crypto/x509 trusts the test CA through it
		conns, pings := r.stat(t, "stats", "total_connections_received"), r.commandCalls(t, "ping")
		evals, evalshas := r.commandCalls(t, "eval"), r.commandCalls(t, "evalsha")
		connections := func() int { return r.stat(t, "stats", "total_connections_received") - conns }
		counter := func(cmd string, before int) func() int {
			return func() int { return r.commandCalls(t, cmd) - before }
		}

		e := startEmulator(t, f, bins[f.Code], env)
		for i := range 6 {
			ev := readEvent(t, create)
			// A new idempotency key each time: every request is a first delivery (2 round trips).
			ev.Headers["idempotency-key"] = "warm-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)
			resp, err := e.invoke(t, ev)
			if err != nil || resp.StatusCode != 201 {
				t.Fatalf("round %d request %d: %d %s %v", round, i, resp.StatusCode, resp.Body, err)
			}
			if i == 0 {
				// The whole first request, init included, opened one connection, and PINGed on it:
				// the warm-up at init, which the request then used.
				if n := settled(connections, 1); n != 1 {
					t.Fatalf("round %d: the first invocation opened %d connections to Redis, want 1", round, n)
				}
				if n := settled(counter("ping", pings), 1); n != 1 {
					t.Fatalf("round %d: %d PINGs during the first invocation, want the one of the init warm-up", round, n)
				}
			}
		}
		if n := settled(connections, 1); n != 1 {
			t.Errorf("round %d: %d connections for 6 requests, want the 1 made at init", round, n)
		}
		// Every request claims and completes by SHA (payments fences: its claim is a script too):
		// the two EVALs are the synthetic payment's at init, whose guard has its own scripts.
		if n, m := settled(counter("eval", evals), 2), settled(counter("evalsha", evalshas), 12); n != 2 || m != 12 {
			t.Errorf("round %d: %d EVAL and %d EVALSHA for init and 6 requests, want 2 (the priming at init) and 12", round, n, m)
		}
		// The sixth line reaches the emulator's output a moment after the sixth answer.
		var d []float64
		out := e.waitOutput(func(out string) bool { d = durations(t, out); return len(d) >= 6 })
		if len(d) != 6 {
			t.Fatalf("round %d: %d request log lines, want 6:\n%s", round, len(d), out)
		}
		firsts = append(firsts, d[0])
		warms = append(warms, median(d[1:]))
	}
	ratios := make([]string, rounds)
	for i := range rounds {
		ratios[i] = strconv.FormatFloat(firsts[i]/warms[i], 'f', 2, 64)
	}
	first, warm := median(firsts), median(warms)
	t.Logf("payments over TLS Redis under the emulator, median of %d environments: first request after init %.3f ms, "+
		"warm first delivery %.3f ms, ratio %.2f (per environment: %s)", rounds, first, warm, first/warm, strings.Join(ratios, " "))
}

// Inside Lambda the payments function needs PAYMENTS_AUTH, and with iam it refuses a request
// that carries no IAM identity and serves one that does.
func TestPaymentsAuthorizationUnderTheEmulator(t *testing.T) {
	tpl, all, bins := setup(t)
	f, ok := tpl.Function("PaymentsFunction")
	if !ok {
		t.Fatal("no PaymentsFunction in the template")
	}
	if f.Env["PAYMENTS_AUTH"] != "iam" {
		t.Fatalf("the template's default PAYMENTS_AUTH is %q, want iam", f.Env["PAYMENTS_AUTH"])
	}
	var ev events.APIGatewayV2HTTPRequest
	for _, s := range all {
		if s.File == "payments-create.json" {
			ev = readEvent(t, s)
		}
	}
	prefix := strings.TrimSuffix(testsupport.UniquePrefix(t), ":")

	t.Run("unset fails init", func(t *testing.T) {
		env := lambdaEnv(f, prefix)
		delete(env, "PAYMENTS_AUTH")
		e := startEmulator(t, f, bins[f.Code], env)
		if resp, err := e.invoke(t, ev); err == nil {
			t.Fatalf("answered %d %s, want an init failure", resp.StatusCode, resp.Body)
		}
		// The emulator may answer before the function's last line has been copied from its pipe.
		named := func(out string) bool { return strings.Contains(out, "PAYMENTS_AUTH") }
		if out := e.waitOutput(named); !named(out) {
			t.Errorf("the init failure does not name PAYMENTS_AUTH:\n%s", out)
		}
	})
	t.Run("iam", func(t *testing.T) {
		env := lambdaEnv(f, prefix)
		env["PAYMENTS_AUTH"] = "iam"
		e := startEmulator(t, f, bins[f.Code], env)
		resp, err := e.invoke(t, ev)
		if err != nil || resp.StatusCode != 401 || !strings.Contains(resp.Body, `"unauthenticated"`) {
			t.Fatalf("without an identity: %d %s %v, want 401 unauthenticated", resp.StatusCode, resp.Body, err)
		}
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
				UserARN: "arn:aws:sts::123456789012:assumed-role/CheckoutService/checkout",
			},
		}
		if resp, err := e.invoke(t, ev); err != nil || resp.StatusCode != 201 {
			t.Fatalf("with an IAM identity: %d %s %v, want 201", resp.StatusCode, resp.Body, err)
		}
	})
}
