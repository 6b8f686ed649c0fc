package redisconn

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
)

func TestWarmUpLeavesAnAuthenticatedTLSConnectionInThePool(t *testing.T) {
	pki := newTestPKI(t)
	const password = "warm-pa55word"
	addr := startTLSRedisServer(t, pki, password)
	c := mustOpen(t, Settings{URL: "rediss://:" + password + "@" + addr}, WithRootCAs(pki.roots), WithWarmUp(5*time.Second))
	firstCommandReusesTheWarmConnection(t, c)
}

func TestWarmUpReachesEveryClusterPrimary(t *testing.T) {
	cluster := testsupport.StartCluster(t, 3, 0)
	c := mustOpen(t, Settings{URL: "redis://" + cluster.Addrs()[0], Cluster: true}, WithWarmUp(5*time.Second))
	// One connection to each of the three primaries (plus the one that loaded the slots).
	if s := c.Client.PoolStats(); s.IdleConns < 3 {
		t.Fatalf("after the warm-up: %+v, want a connection to each of 3 primaries", *s)
	}
	firstCommandReusesTheWarmConnection(t, c)
}

// firstCommandReusesTheWarmConnection checks that c has an idle pooled connection and that a
// first command finds it: no dial, hence no TLS handshake and no AUTH, on the first request.
func firstCommandReusesTheWarmConnection(t *testing.T, c *Conn) {
	t.Helper()
	stats := *c.Client.PoolStats()
	if stats.TotalConns < 1 || stats.IdleConns < 1 {
		t.Fatalf("after Open with WithWarmUp: %+v, want an idle pooled connection", stats)
	}
	if err := c.Client.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if after := *c.Client.PoolStats(); after.Misses != stats.Misses || after.TotalConns != stats.TotalConns {
		t.Fatalf("the first command dialled: before %+v, after %+v", stats, after)
	}
}

func TestWithoutWarmUpOpenDialsNothing(t *testing.T) {
	pki := newTestPKI(t)
	addr := startTLSRedisServer(t, pki, "pw")
	c := mustOpen(t, Settings{URL: "rediss://:pw@" + addr}, WithRootCAs(pki.roots))
	if s := c.Client.PoolStats(); s.TotalConns != 0 {
		t.Fatalf("Open without WithWarmUp: %+v, want no connection", *s)
	}
}

func TestWarmUpNeverFailsOpenWhenRedisIsDown(t *testing.T) {
	c := mustOpen(t, Settings{URL: "redis://" + testsupport.ClosedAddr(t)}, WithWarmUp(time.Second))
	if err := c.Warm(context.Background(), time.Second); err == nil {
		t.Fatal("Warm against a closed port succeeded")
	}
}

// A server that accepts and never answers (a security group that drops, a frozen node) must
// not hold init beyond the limit.
func TestWarmUpIsBoundedWhenRedisNeverAnswers(t *testing.T) {
	addr := testsupport.Serve(t, func(net.Conn) {})
	pki := newTestPKI(t)
	// Long client timeouts, so only Warm's own limit can end the wait.
	c := mustOpen(t, Settings{URL: "rediss://" + addr}, WithRootCAs(pki.roots),
		WithTimeouts(time.Minute, time.Minute, time.Minute))
	const limit = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- c.Warm(context.Background(), limit) }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrWarmUpTimeout) {
			t.Fatalf("Warm: %v, want ErrWarmUpTimeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Warm did not return: init would hang")
	}
}
