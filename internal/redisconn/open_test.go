package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/testsupport"
)

func mustOpen(t *testing.T, s Settings, opts ...Option) *Conn {
	t.Helper()
	c, err := Open(context.Background(), s, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func singleOptions(t *testing.T, c *Conn) *redis.Options {
	t.Helper()
	rc, ok := c.Client.(*redis.Client)
	if !ok {
		t.Fatalf("Client is %T, want *redis.Client", c.Client)
	}
	return rc.Options()
}

// countingListener accepts connections, counts them and leaves them silent.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	accepted = &atomic.Int32{}
	return testsupport.Serve(t, func(net.Conn) { accepted.Add(1) }), accepted
}

func TestOpenDoesNotDial(t *testing.T) {
	addr, accepted := countingListener(t)
	for _, cluster := range []bool{false, true} {
		c := mustOpen(t, Settings{URL: "redis://" + addr, Cluster: cluster})
		if c.Addr() != addr {
			t.Errorf("cluster=%v: Addr() = %q, want %q", cluster, c.Addr(), addr)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("Open made %d connections, want none", n)
	}
}

// A closed port is refused at once: the first command fails with the dial's own error (connection
// refused), not after waiting for a dial timeout, and Open itself dials nothing (above).
func TestFirstCommandAgainstClosedPortFailsFast(t *testing.T) {
	addr := testsupport.ClosedAddr(t)
	for _, cluster := range []bool{false, true} {
		c := mustOpen(t, Settings{URL: "redis://" + addr, Cluster: cluster})
		err := c.Client.Ping(context.Background()).Err()
		var opErr *net.OpError
		if !errors.As(err, &opErr) || opErr.Op != "dial" {
			t.Errorf("cluster=%v: Ping err = %v (%T), want a *net.OpError of the dial", cluster, err, err)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("cluster=%v: Ping err = %v, want connection refused (not a dial timeout)", cluster, err)
		}
	}
}

// A silent server fails the command with a timeout of the configured read timeout, after at most
// DefaultMaxRetries retries. (go-redis does not retry a timeout in the connection handshake,
// which is where a silent server is noticed, so usually there is a single attempt.)
func TestUnresponsiveServerFailsWithinReadTimeout(t *testing.T) {
	addr, accepted := countingListener(t)
	const read = 100 * time.Millisecond
	c := mustOpen(t, Settings{URL: "redis://" + addr}, WithTimeouts(0, read, 0))
	if got := singleOptions(t, c).ReadTimeout; got != read {
		t.Fatalf("ReadTimeout = %v, want %v", got, read)
	}
	err := c.Client.Ping(context.Background()).Err()
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("Ping err = %v, want a net.Error timeout", err)
	}
	if n := accepted.Load(); n < 1 || n > DefaultMaxRetries+1 {
		t.Errorf("server saw %d connections, want 1 to %d", n, DefaultMaxRetries+1)
	}
}

// A context deadline shorter than the read timeout ends the command first: it fails before the
// 5 s read timeout could have passed once.
func TestContextDeadlineShorterThanReadTimeoutWins(t *testing.T) {
	addr, _ := countingListener(t)
	const read = 5 * time.Second
	c := mustOpen(t, Settings{URL: "redis://" + addr}, WithTimeouts(0, read, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.Client.Ping(ctx).Err(); err == nil {
		t.Fatal("Ping succeeded against a silent server")
	}
	if elapsed := time.Since(start); elapsed >= read {
		t.Errorf("Ping with a 100ms deadline took %v, the read timeout's %v", elapsed, read)
	}
}

func TestOpenRequiresURL(t *testing.T) {
	// No fallback to an embedded server, inside Lambda or not: only the local API starts one.
	_, err := Open(context.Background(), Settings{})
	var se *setting.Error
	if !errors.As(err, &se) || se.Var != EnvURL {
		t.Fatalf("err = %v, want a *setting.Error for %s", err, EnvURL)
	}
}

func TestClientOptionsForLambda(t *testing.T) {
	o := singleOptions(t, mustOpen(t, Settings{URL: "redis://cache.example.com:6379"}))
	checks := []struct {
		name      string
		got, want any
	}{
		{"DialTimeout", o.DialTimeout, DefaultDialTimeout},
		{"ReadTimeout", o.ReadTimeout, DefaultReadTimeout},
		{"WriteTimeout", o.WriteTimeout, DefaultWriteTimeout},
		{"ContextTimeoutEnabled", o.ContextTimeoutEnabled, true},
		{"MaxRetries", o.MaxRetries, DefaultMaxRetries},
		{"MaxRetryBackoff", o.MaxRetryBackoff, maxRetryBackoff},
		{"DialerRetries", o.DialerRetries, 1},
		{"PoolSize", o.PoolSize, DefaultPoolSize},
		{"MinIdleConns", o.MinIdleConns, 0},
		{"ConnMaxIdleTime", o.ConnMaxIdleTime, DefaultConnMaxIdleTime},
		{"PipelinePoolSize", o.PipelinePoolSize, -1},
		{"DisableIdentity", o.DisableIdentity, true},
		{"TLSConfig", o.TLSConfig == nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestTimeoutsFromOptionsAndURL(t *testing.T) {
	o := singleOptions(t, mustOpen(t, Settings{URL: "redis://h:6379"}, WithTimeouts(2*time.Second, 300*time.Millisecond, 0)))
	if o.DialTimeout != 2*time.Second || o.ReadTimeout != 300*time.Millisecond || o.WriteTimeout != DefaultWriteTimeout {
		t.Errorf("WithTimeouts: dial %v read %v write %v", o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
	}
	o = singleOptions(t, mustOpen(t, Settings{URL: "redis://h:6379?read_timeout=750ms&max_retries=2"}, WithTimeouts(0, 300*time.Millisecond, 0)))
	if o.ReadTimeout != 750*time.Millisecond || o.MaxRetries != 2 {
		t.Errorf("URL parameters: read %v, max retries %d; want 750ms, 2", o.ReadTimeout, o.MaxRetries)
	}
}

func TestPoolSizeFollowsLambdaConcurrency(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{}, DefaultPoolSize},
		{map[string]string{EnvMaxConcurrency: "2"}, DefaultPoolSize},
		{map[string]string{EnvMaxConcurrency: "32"}, 32},
		{map[string]string{EnvMaxConcurrency: "32", EnvURL: "redis://h:6379?pool_size=7"}, 7},
	}
	for _, tt := range tests {
		if tt.env[EnvURL] == "" {
			tt.env[EnvURL] = "redis://h:6379"
		}
		s, err := SettingsFromEnv(testsupport.Env(tt.env))
		if err != nil {
			t.Fatal(err)
		}
		if got := singleOptions(t, mustOpen(t, s)).PoolSize; got != tt.want {
			t.Errorf("%v: PoolSize = %d, want %d", tt.env, got, tt.want)
		}
		s.Cluster = true
		if got := mustOpen(t, s).Client.(*redis.ClusterClient).Options().PoolSize; got != tt.want {
			t.Errorf("%v, cluster: PoolSize = %d, want %d", tt.env, got, tt.want)
		}
	}
}

func TestClusterSettingBuildsClusterClient(t *testing.T) {
	s, err := SettingsFromEnv(testsupport.Env(map[string]string{
		EnvURL:        "rediss://clustercfg.my-cache.abc123.use1.cache.amazonaws.com:6379?addr=node2.example.com:6379",
		EnvCluster:    "true",
		EnvRuntimeAPI: "127.0.0.1:9001",
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, s)
	cc, ok := c.Client.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("Client is %T, want *redis.ClusterClient", c.Client)
	}
	o := cc.Options()
	if len(o.Addrs) != 2 || o.Addrs[0] != c.Addr() || c.Addr() != "clustercfg.my-cache.abc123.use1.cache.amazonaws.com:6379" {
		t.Errorf("Addrs = %v, Addr() = %q", o.Addrs, c.Addr())
	}
	if !clusterTunedForLambda(o) {
		t.Errorf("cluster options not tuned for Lambda: %+v", o)
	}
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "clustercfg.my-cache.abc123.use1.cache.amazonaws.com" || o.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("TLSConfig = %+v", o.TLSConfig)
	}
}

// clusterTunedForLambda reports whether o has the defaults Open sets for a
// cluster client in Lambda: reads from primaries, context deadlines honoured,
// short timeouts, bounded redirects, idle connections dropped, no pipelining pool.
func clusterTunedForLambda(o *redis.ClusterOptions) bool {
	return !o.ReadOnly && o.ContextTimeoutEnabled && o.ReadTimeout == DefaultReadTimeout && o.DialTimeout == DefaultDialTimeout &&
		o.MaxRedirects == DefaultMaxRedirects && o.ConnMaxIdleTime == DefaultConnMaxIdleTime && o.PipelinePoolSize == -1
}

func TestClusterClientWorksAgainstClusterServer(t *testing.T) {
	m := miniredis.RunT(t)
	c := mustOpen(t, Settings{URL: "redis://" + m.Addr(), Cluster: true})
	ctx := context.Background()
	if err := c.Client.Set(ctx, "{scope}:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := m.Get("{scope}:k"); err != nil || v != "v" {
		t.Fatalf("server holds %q, %v", v, err)
	}
}

func TestRedissUsesTLS12WithServerNameFromHost(t *testing.T) {
	o := singleOptions(t, mustOpen(t, Settings{URL: "rediss://user:pw@master.my-cache.abc123.use1.cache.amazonaws.com:6379/2"}))
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "master.my-cache.abc123.use1.cache.amazonaws.com" || o.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("TLSConfig = %+v", o.TLSConfig)
	}
	if o.Username != "user" || o.Password != "pw" || o.DB != 2 {
		t.Errorf("user %q password %q db %d", o.Username, o.Password, o.DB)
	}
}

func TestCloseTwiceReturnsTheFirstResult(t *testing.T) {
	c, err := Open(context.Background(), Settings{URL: "redis://" + testsupport.ClosedAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Client.Ping(context.Background()).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("Ping after Close = %v, want redis.ErrClosed", err)
	}
}

func TestClosingANilConnDoesNothing(t *testing.T) {
	var c *Conn
	if err := c.Close(); err != nil {
		t.Fatalf("nil Conn Close = %v, want nil", err)
	}
}
