package testsupport

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicated is a private primary with one replica, each a redis-server without persistence.
// The replica replicates through Link, a [Proxy] between it and the primary, so a test can make
// it trail the primary (Link.SetLatency(0, lag) delays the replication stream, not the
// replica's acknowledgements) or cut it off.
type Replicated struct {
	Primary, Replica *RedisServer
	Link             *Proxy
}

// StartReplicated starts a primary and a replica of it through a proxy, and waits until the
// replica is in sync (at most 10 seconds, else the test fails). Extra args go to both servers.
func StartReplicated(t testing.TB, args ...string) *Replicated {
	t.Helper()
	primary := StartRedis(t, args...)
	link := StartProxy(t, primary.Addr())
	host, port, _ := net.SplitHostPort(link.Addr())
	replica := StartRedis(t, append([]string{"--replicaof", host, port, "--repl-diskless-sync-delay", "0"}, args...)...)
	r := &Replicated{Primary: primary, Replica: replica, Link: link}
	if err := r.WaitInSync(10 * time.Second); err != nil {
		t.Fatalf("testsupport: %v", err)
	}
	return r
}

// StartReplica starts a replica of primary that replicates from it directly, with no proxy in
// between (for benchmarks: a proxy in the test's process would add its own cost), and waits
// until it is in sync (at most 10 seconds, else the test fails).
func StartReplica(t testing.TB, primary *RedisServer, args ...string) *RedisServer {
	t.Helper()
	replica := StartRedis(t, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()), "--repl-diskless-sync-delay", "0"}, args...)...)
	if err := (&Replicated{Primary: primary, Replica: replica}).WaitInSync(10 * time.Second); err != nil {
		t.Fatalf("testsupport: %v", err)
	}
	return replica
}

// WaitInSync waits until the replica's link to the primary is up and the primary counts one
// replica online, for at most timeout.
func (r *Replicated) WaitInSync(timeout time.Duration) error {
	p := redis.NewClient(&redis.Options{Addr: r.Primary.Addr()})
	defer p.Close()
	rep := redis.NewClient(&redis.Options{Addr: r.Replica.Addr()})
	defer rep.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		pi, _ := p.Info(ctx, "replication").Result()
		ri, _ := rep.Info(ctx, "replication").Result()
		cancel()
		if strings.Contains(pi, "connected_slaves:1") && strings.Contains(ri, "master_link_status:up") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s not in sync with %s after %s:\n%s\n%s", r.Replica.Addr(), r.Primary.Addr(), timeout, pi, ri)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Promote makes the replica a primary (REPLICAOF NO ONE), as a failover does: it keeps what it
// had received, and the primary loses its replica.
func (r *Replicated) Promote(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Replica.Addr()})
	defer c.Close()
	if err := c.Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		return fmt.Errorf("promote %s: %w", r.Replica.Addr(), err)
	}
	return nil
}

// Demote makes the old primary a replica of the promoted one, directly (not through Link), as
// a failed-over primary that comes back rejoins: it drops its data for the new primary's.
func (r *Replicated) Demote(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: r.Primary.Addr()})
	defer c.Close()
	if err := c.Do(ctx, "replicaof", "127.0.0.1", strconv.Itoa(r.Replica.Port())).Err(); err != nil {
		return fmt.Errorf("demote %s: %w", r.Primary.Addr(), err)
	}
	return nil
}

// Endpoint is a loopback TCP forwarder whose target can be switched, as a DNS name or a
// cluster's primary endpoint is moved by a failover: Switch closes every open connection and
// sends the new ones to the new target. Its methods are safe for concurrent use.
type Endpoint struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartEndpoint starts an endpoint on a free port of 127.0.0.1 forwarding to target. It is
// closed at cleanup.
func StartEndpoint(t testing.TB, target string) *Endpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsupport: endpoint listen: %v", err)
	}
	e := &Endpoint{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	e.wg.Go(e.accept)
	t.Cleanup(e.Close)
	return e
}

// Addr returns the address clients connect to.
func (e *Endpoint) Addr() string { return e.ln.Addr().String() }

// URL returns Addr as a redis:// URL.
func (e *Endpoint) URL() string { return "redis://" + e.Addr() }

// Switch sends new connections to target and closes the open ones, so clients reconnect there.
func (e *Endpoint) Switch(target string) {
	e.mu.Lock()
	e.target = target
	conns := make([]net.Conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Close stops accepting, closes every connection and waits for the forwarding goroutines.
func (e *Endpoint) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	e.ln.Close()
	e.Switch("")
	e.wg.Wait()
}

// track registers c, or closes it and reports false when the endpoint is closed.
func (e *Endpoint) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		c.Close()
		return false
	}
	e.conns[c] = struct{}{}
	return true
}

func (e *Endpoint) untrack(c net.Conn) {
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
	c.Close()
}

func (e *Endpoint) accept() {
	for {
		client, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		target := e.target
		e.mu.Unlock()
		up, err := net.DialTimeout("tcp", target, 2*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		if !e.track(client) || !e.track(up) {
			client.Close()
			up.Close()
			return
		}
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			e.untrack(dst)
			e.untrack(src)
		}
		e.wg.Go(func() { pipe(up, client) })
		e.wg.Go(func() { pipe(client, up) })
	}
}
