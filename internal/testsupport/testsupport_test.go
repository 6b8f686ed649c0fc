package testsupport_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/testsupport"
)

// recorder is a testing.TB that records Fatalf and Skipf instead of stopping the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }

func TestUnavailableFailsUnderCIAndSkipsOtherwise(t *testing.T) {
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	testsupport.Unavailable(r, "redis-server %s", "missing")
	if !strings.Contains(r.fatal, "redis-server missing") || r.skip != "" {
		t.Errorf("with CI set: fatal %q, skip %q; want a failure naming what is missing", r.fatal, r.skip)
	}

	t.Setenv("CI", "")
	r = &recorder{TB: t}
	testsupport.Unavailable(r, "redis-server %s", "missing")
	if !strings.Contains(r.skip, "redis-server missing") || r.fatal != "" {
		t.Errorf("with CI empty: fatal %q, skip %q; want a skip naming what is missing", r.fatal, r.skip)
	}
}

func TestUniquePrefixKeysAreDeletedAtCleanup(t *testing.T) {
	rdb := testsupport.SharedRedis(t)
	ctx := context.Background()
	var prefix string
	t.Run("writer", func(t *testing.T) {
		prefix = testsupport.UniquePrefix(t)
		if other := testsupport.UniquePrefix(t); other == prefix {
			t.Fatalf("two calls returned the same prefix %q", prefix)
		}
		pipe := rdb.Pipeline()
		for i := range 1200 { // more than one SCAN page and one UNLINK batch
			pipe.Set(ctx, fmt.Sprintf("%s{k%d}", prefix, i), "v", time.Minute)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	})
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("%d keys under %q survived the subtest's cleanup", len(keys), prefix)
	}
}

func TestRedisServerRestartsEmptyOnTheSamePort(t *testing.T) {
	srv := testsupport.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if srv.Running() {
		t.Error("Running() is true after Stop")
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Error("PING succeeded while the server was stopped")
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != addr {
		t.Errorf("address changed across restart: %s, then %s", addr, srv.Addr())
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after restart: %v", err)
	}
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET after restart: %v, want redis.Nil (no persistence)", err)
	}
	if err := srv.Start(); err == nil {
		t.Error("Start on a running server succeeded")
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start after Kill: %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Kill and Start: %v", err)
	}
}

func TestStartRedisPassesExtraArgs(t *testing.T) {
	srv := testsupport.StartRedis(t, "--maxmemory", "7mb")
	got, err := srv.NewClient().ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["maxmemory"] != "7340032" {
		t.Errorf("maxmemory = %q, want 7340032", got["maxmemory"])
	}
}

func TestKeySlotMatchesRedis(t *testing.T) {
	for key, want := range map[string]int{
		"foo":                  12182,
		"123456789":            0x31C3 % 16384, // the CRC16/XMODEM check value
		"{user1000}.following": 3443,
		"user1000":             3443,
		"{}x":                  testsupport.KeySlot("{}x"), // an empty tag hashes the whole key
		"idem:{a:b}":           testsupport.KeySlot("a:b"),
	} {
		if got := testsupport.KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if testsupport.KeySlot("{}x") == testsupport.KeySlot("") {
		t.Error(`"{}x" hashed as an empty tag`)
	}
}

// keysOnEveryMaster returns one key per master, each in a slot that master serves.
func keysOnEveryMaster(t *testing.T, c *testsupport.Cluster) map[string]string {
	t.Helper()
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{} // master -> key
	for i := 0; len(keys) < len(masters) && i < 10000; i++ {
		key := fmt.Sprintf("key%d", i)
		node, err := c.NodeFor(testsupport.KeySlot(key))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keys[node]; !ok {
			keys[node] = key
		}
	}
	if len(keys) != len(masters) {
		t.Fatalf("found keys for %d of %d masters", len(keys), len(masters))
	}
	return keys
}

func TestClusterServesKeysInEverySlotRange(t *testing.T) {
	t.Parallel()
	c := testsupport.StartCluster(t, 3, 1)
	if got := len(c.Addrs()); got != 6 {
		t.Fatalf("%d nodes, want 6", got)
	}
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	if len(masters) != 3 {
		t.Fatalf("masters = %v, want 3", masters)
	}
	ctx := context.Background()
	cc := c.NewClient()
	for master, key := range keysOnEveryMaster(t, c) {
		if err := cc.Set(ctx, key, master, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		// The key must live on the master NodeFor named, and Redis must agree on its slot.
		direct := redis.NewClient(&redis.Options{Addr: master})
		defer direct.Close()
		if got, err := direct.Get(ctx, key).Result(); err != nil || got != master {
			t.Errorf("GET %s on %s = %q, %v; want %q", key, master, got, err, master)
		}
		if slot, err := direct.ClusterKeySlot(ctx, key).Result(); err != nil || int(slot) != testsupport.KeySlot(key) {
			t.Errorf("CLUSTER KEYSLOT %s = %d, %v; KeySlot says %d", key, slot, err, testsupport.KeySlot(key))
		}
	}
}

func TestClusterFailsOverWhenAMasterIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("failover takes several seconds")
	}
	t.Parallel()
	c := testsupport.StartCluster(t, 3, 1)
	killed, err := c.KillMaster(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	masters, err := c.Masters()
	if err != nil {
		t.Fatal(err)
	}
	if len(masters) != 3 || slices.Contains(masters, killed) {
		t.Errorf("masters after failover = %v; want 3 without the killed %s", masters, killed)
	}
	ctx := context.Background()
	cc := c.NewClient()
	for _, key := range keysOnEveryMaster(t, c) {
		if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Errorf("SET %s after failover: %v", key, err)
		}
	}
}

// startEcho starts a TCP server that echoes every line back.
func startEcho(t *testing.T) string {
	t.Helper()
	return testsupport.Serve(t, func(c net.Conn) {
		_, _ = io.Copy(c, c)
		c.Close()
	})
}

// echoConn is a client connection to an echo server through the proxy.
type echoConn struct {
	net.Conn
	r *bufio.Reader
}

func dialEcho(t *testing.T, addr string) *echoConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &echoConn{Conn: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and waits up to timeout for it to come back.
func (c *echoConn) roundTrip(line string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := c.SetDeadline(start.Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return 0, err
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return time.Since(start), err
	}
	if got != line+"\n" {
		return 0, fmt.Errorf("echo returned %q, want %q", got, line)
	}
	return time.Since(start), nil
}

// echoProxy starts a proxy to an echo server and returns it with a connection through it on
// which a line has made the round trip.
func echoProxy(t *testing.T) (*testsupport.Proxy, *echoConn) {
	t.Helper()
	p := testsupport.StartProxy(t, startEcho(t))
	c := dialEcho(t, p.Addr())
	if _, err := c.roundTrip("before", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	return p, c
}

// The added latency is a lower bound of every round trip, whatever the machine's load; that it
// is gone again is shown by a round trip shorter than the latency that was set (the fastest of a
// few, so that a busy moment does not count).
func TestProxyAddsLatencyPerDirection(t *testing.T) {
	p, c := echoProxy(t)
	for _, tc := range []struct {
		name     string
		up, down time.Duration
		atLeast  time.Duration
	}{
		{"up", 150 * time.Millisecond, 0, 150 * time.Millisecond},
		{"down", 0, 150 * time.Millisecond, 150 * time.Millisecond},
		{"both", 100 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
	} {
		p.SetLatency(tc.up, tc.down)
		if d, err := c.roundTrip(tc.name, 5*time.Second); err != nil || d < tc.atLeast {
			t.Errorf("round trip with %v toward the target and %v toward the client: %v, %v; want at least %v", tc.up, tc.down, d, err, tc.atLeast)
		}
	}
	const set = time.Second
	p.SetLatency(set, set)
	p.SetLatency(0, 0)
	fastest := time.Duration(1<<63 - 1)
	for i := range 3 {
		d, err := c.roundTrip(fmt.Sprintf("none%d", i), 10*time.Second)
		if err != nil {
			t.Fatalf("round trip after removing latency: %v", err)
		}
		fastest = min(fastest, d)
	}
	if fastest >= set {
		t.Errorf("fastest round trip after removing a latency of %v each way: %v", set, fastest)
	}
}

func TestProxyDropClosesOpenConnectionsAndAcceptsNewOnes(t *testing.T) {
	p, c := echoProxy(t)
	p.Drop()
	if _, err := c.roundTrip("after", 2*time.Second); err == nil {
		t.Error("round trip on a dropped connection succeeded")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("dropped connection timed out instead of closing: %v", err)
	}
	if _, err := dialEcho(t, p.Addr()).roundTrip("new", 2*time.Second); err != nil {
		t.Errorf("new connection after Drop: %v", err)
	}
}

func TestProxyBlackholeHoldsTrafficUntilResume(t *testing.T) {
	p, open := echoProxy(t)
	p.Blackhole()
	if _, err := open.roundTrip("held", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("open connection while blackholed: %v, want a timeout", err)
	}
	fresh := dialEcho(t, p.Addr()) // accepted, but never connected onward
	if _, err := fresh.roundTrip("fresh", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("new connection while blackholed: %v, want a timeout", err)
	}
	p.Resume()
	if _, err := dialEcho(t, p.Addr()).roundTrip("resumed", 2*time.Second); err != nil {
		t.Errorf("new connection after Resume: %v", err)
	}
	// The held line is delivered once forwarding resumes.
	if err := fresh.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := fresh.r.ReadString('\n'); err != nil || got != "fresh\n" {
		t.Errorf("held line after Resume: %q, %v", got, err)
	}
}

func TestProxyForwardsRedisTraffic(t *testing.T) {
	srv := testsupport.StartRedis(t)
	p := testsupport.StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	if err := rdb.Get(ctx, "k").Err(); err == nil {
		t.Error("GET through a blackholed proxy succeeded")
	}
	p.Resume()
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("GET after Resume = %q, %v", got, err)
	}
}

func TestDynaliteAnswersDynamoDBRequests(t *testing.T) {
	endpoint := testsupport.StartDynalite(t)
	client := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	out, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatalf("ListTables on %s: %v", endpoint, err)
	}
	if len(out.TableNames) != 0 {
		t.Errorf("a fresh dynalite has tables %v", out.TableNames)
	}
}

func TestCommandCounterCountsCommandsRoundTripsAndDials(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	// One connection, pipelines included (no pipeline pool), so that only the first command dials.
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 1, PipelinePoolSize: -1})
	defer c.Close()
	var n testsupport.CommandCounter
	c.AddHook(&n)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n.Dials.Load() == 0 {
		t.Fatal("the first command's connection was not counted as a dial")
	}
	n.Commands.Store(0)
	n.RoundTrips.Store(0)
	n.Dials.Store(0)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "k")
		p.Get(ctx, "k")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := [3]int64{n.Commands.Load(), n.RoundTrips.Load(), n.Dials.Load()}; got != [3]int64{3, 2, 0} {
		t.Fatalf("commands, round trips, dials = %v; want [3 2 0]", got)
	}
}

func TestClosedAddrRefusesADial(t *testing.T) {
	if c, err := net.DialTimeout("tcp", testsupport.ClosedAddr(t), time.Second); err == nil {
		c.Close()
		t.Fatal("a dial to ClosedAddr was accepted")
	}
}

func TestEnvReadsTheMap(t *testing.T) {
	env := testsupport.Env(map[string]string{"A": "1"})
	if env("A") != "1" || env("B") != "" {
		t.Fatalf("Env: A=%q B=%q, want 1 and empty", env("A"), env("B"))
	}
}
