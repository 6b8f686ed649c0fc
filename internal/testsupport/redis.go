package testsupport

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultSharedRedisAddr is the address of the shared Redis used when REDIS_TEST_ADDR is unset.
const DefaultSharedRedisAddr = "127.0.0.1:6379"

// SharedRedisAddr returns the address of the shared test Redis: REDIS_TEST_ADDR if set, else
// [DefaultSharedRedisAddr].
func SharedRedisAddr() string {
	if a := os.Getenv("REDIS_TEST_ADDR"); a != "" {
		return a
	}
	return DefaultSharedRedisAddr
}

// SharedRedis returns a client for the shared test Redis at [SharedRedisAddr], closed at cleanup.
// The server is shared with other tests and other packages running in parallel: the client uses
// database 0 and nothing here flushes or reconfigures it, so tests must keep their keys under a
// [UniquePrefix]. If the server does not answer a PING within a second or two the test is skipped,
// or failed under CI (see [Unavailable]).
func SharedRedis(t testing.TB) *redis.Client {
	t.Helper()
	addr := SharedRedisAddr()
	if err := pingRESP(addr); err != nil {
		Unavailable(t, "shared Redis at %s does not answer: %v (start redis-server there or set REDIS_TEST_ADDR)", addr, err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// UniquePrefix returns a key prefix no other test uses, made of the test's name and a random
// suffix, containing only letters, digits and "_-.:" (so it is safe in a SCAN MATCH pattern and
// needs no quoting). At cleanup every key that starts with the prefix is deleted from the shared
// Redis with SCAN and UNLINK; if the shared Redis is unreachable then, cleanup does nothing.
func UniquePrefix(t testing.TB) string {
	t.Helper()
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatalf("testsupport: random prefix: %v", err)
	}
	name := strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.':
			return c
		default:
			return '_'
		}
	}, t.Name())
	if len(name) > 48 {
		name = name[len(name)-48:]
	}
	prefix := "test:" + name + ":" + hex.EncodeToString(r[:]) + ":"
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: SharedRedisAddr(), DialTimeout: time.Second, MaxRetries: -1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := deletePrefix(ctx, c, prefix); err != nil {
			t.Logf("testsupport: delete keys %s*: %v", prefix, err)
		}
	})
	return prefix
}

// deletePrefix unlinks every key starting with prefix. An unreachable server is not an error:
// there is nothing to clean on a server that is gone.
func deletePrefix(ctx context.Context, c *redis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return fmt.Errorf("unlink: %w", err)
			}
		}
	}
	if err := iter.Err(); err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return nil
		}
		return fmt.Errorf("scan: %w", err)
	}
	if err := flush(); err != nil {
		return fmt.Errorf("unlink: %w", err)
	}
	return nil
}

// RedisServer is a private redis-server process on a loopback port, without persistence. It can
// be stopped and started again on the same port, to test clients across a Redis outage. Its
// methods are safe for concurrent use and may be called from any goroutine.
type RedisServer struct {
	t    testing.TB
	bin  string
	port int
	args []string // command line without --port

	mu   sync.Mutex
	proc *process // nil while stopped
}

// StartRedis starts a redis-server on a free port of 127.0.0.1 with persistence off (no RDB
// snapshots, no AOF) and its working directory in a test temp dir, waits until it answers, and
// kills it at cleanup. Extra args are appended to the command line, so they override the
// defaults (for example "--maxmemory", "1mb"); they must not set --port or --bind. If
// redis-server is missing or does not come up, the test is skipped, or failed under CI (see
// [Unavailable]).
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server not found in PATH: %v", err)
	}
	return startPrivate(t, bin, args)
}

// startPrivate starts bin (a redis-server) on a free loopback port without
// persistence, with args appended, as StartRedis documents.
func startPrivate(t testing.TB, bin string, args []string) *RedisServer {
	t.Helper()
	base := []string{"--bind", "127.0.0.1", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}
	s, err := startRedisServer(t, bin, append(base, args...), func(map[int]bool) (int, error) { return freePort() })
	if err != nil {
		Unavailable(t, "%s did not start: %v", filepath.Base(bin), err)
	}
	return s
}

// startRedisServer starts a server on a port from pick, retrying on a new port a few times
// because a free port can be taken between choosing it and binding it. The server is killed at
// cleanup.
func startRedisServer(t testing.TB, bin string, args []string, pick func(avoid map[int]bool) (int, error)) (*RedisServer, error) {
	tried := map[int]bool{}
	var lastErr error
	for range 4 {
		port, err := pick(tried)
		if err != nil {
			return nil, err
		}
		tried[port] = true
		s := &RedisServer{t: t, bin: bin, port: port, args: args}
		if lastErr = s.Start(); lastErr == nil {
			t.Cleanup(func() {
				if err := s.Kill(); err != nil {
					t.Logf("testsupport: %v", err)
				}
			})
			return s, nil
		}
	}
	return nil, lastErr
}

// Addr returns the server's address, "127.0.0.1:<port>". It stays the same across Stop and Start.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port.
func (s *RedisServer) Port() int { return s.port }

// URL returns the server's address as a redis:// URL, the form REDIS_URL takes.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() }

// NewClient returns a go-redis client for the server, closed at cleanup.
func (s *RedisServer) NewClient() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// BenchRedis returns a client of a private redis-server, started for b, with the pool the
// benchmarks share (4 connections), answering and closed at cleanup: the functions' handler
// benchmarks and the core's beside them run on it.
func BenchRedis(b *testing.B) *redis.Client {
	b.Helper()
	c := redis.NewClient(&redis.Options{Addr: StartRedis(b).Addr(), PoolSize: 4})
	b.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	return c
}

// Running reports whether the server process is running.
func (s *RedisServer) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// Start starts the server again on the same port after Stop or Kill, and waits until it answers.
// It returns an error if the server is already running or does not come up within 10 seconds.
// The restarted server is empty: nothing persists across a restart.
func (s *RedisServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && !s.proc.exited() {
		return fmt.Errorf("redis-server on %s is already running", s.Addr())
	}
	p, err := startProcess(s.bin, append([]string{"--port", strconv.Itoa(s.port)}, s.args...)...)
	if err != nil {
		return err
	}
	if err := waitRESP(s.Addr(), p, 10*time.Second); err != nil {
		_ = p.kill()
		return fmt.Errorf("redis-server on %s: %w; output:\n%s", s.Addr(), err, p.output())
	}
	s.proc = p
	return nil
}

// Stop shuts the server down with SIGTERM (SIGKILL after 5 seconds) and waits for it to exit.
// Connected clients see their connections closed. Stopping a stopped server does nothing.
func (s *RedisServer) Stop() error {
	return s.end("stop", func(p *process) error { return p.stop(5 * time.Second) })
}

// Kill kills the server with SIGKILL, as a crash would, and waits for it to exit. Killing a
// stopped server does nothing.
func (s *RedisServer) Kill() error { return s.end("kill", (*process).kill) }

// end ends the server's process with how, named verb in its error; it does nothing to a
// stopped server.
func (s *RedisServer) end(verb string, how func(*process) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	if err := how(s.proc); err != nil {
		return fmt.Errorf("%s redis-server on %s: %w", verb, s.Addr(), err)
	}
	return nil
}

// waitRESP waits until addr answers a PING with any RESP reply (an error reply such as NOAUTH
// still proves the server is serving), or p exits, or timeout passes.
func waitRESP(addr string, p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if p.exited() {
			return p.exitError()
		}
		if lastErr = pingRESP(addr); lastErr == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no answer within %v: %w", timeout, lastErr)
}

// pingRESP sends one PING and reads one reply line.
func pingRESP(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line == "" || (line[0] != '+' && line[0] != '-') {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}
