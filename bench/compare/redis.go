package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is the private server (redis-server or valkey-server) every implementation is
// measured against: loopback only, no RDB snapshots, no AOF.
type redisServer struct {
	port  int
	cmd   *exec.Cmd
	admin *redis.Client
}

// startServer starts the server binary bin on 127.0.0.1:port, refusing a port something already
// answers on (the measurement would then count another program's commands), and waits until it
// answers.
func startServer(bin string, port int, dir string) (*redisServer, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("port %d already answers; refusing to measure a Redis this program did not start", port)
	}
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", logFile)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &redisServer{port: port, cmd: cmd, admin: redis.NewClient(&redis.Options{Addr: addr})}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := s.admin.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			log, _ := os.ReadFile(logFile)
			return nil, fmt.Errorf("%s on %s did not answer: %w\n%s", bin, addr, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// url returns the server's redis:// URL.
func (s *redisServer) url() string { return "redis://127.0.0.1:" + strconv.Itoa(s.port) }

// stop kills the server and waits for it.
func (s *redisServer) stop() {
	_ = s.admin.Close()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// version names the server and its version: "Valkey 8.1.1" or "Redis 7.0.15".
func (s *redisServer) version(ctx context.Context) string {
	info, err := s.admin.Info(ctx, "server").Result()
	if err != nil {
		return "unknown"
	}
	f := infoFields(info)
	if v := f["valkey_version"]; v != "" {
		return "Valkey " + v
	}
	return "Redis " + f["redis_version"]
}

// commandStats returns calls per command from INFO commandstats, as the peers' stats.mjs does.
func (s *redisServer) commandStats(ctx context.Context) (map[string]int64, error) {
	info, err := s.admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	return parseCommandStats(info), nil
}

// parseCommandStats reads the cmdstat_<name>:calls=<n>,... lines of INFO commandstats.
func parseCommandStats(info string) map[string]int64 {
	stats := map[string]int64{}
	for k, v := range infoFields(info) {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(v, ",")
		if n, err := strconv.ParseInt(strings.TrimPrefix(calls, "calls="), 10, 64); err == nil {
			stats[name] = n
		}
	}
	return stats
}

// commandDelta is after - before per command, leaving out the INFO calls the measurement makes
// itself, as the peers' commandDelta does.
func commandDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for cmd, n := range after {
		if cmd == "info" {
			continue
		}
		if v := n - before[cmd]; v > 0 {
			d[cmd] = v
		}
	}
	return d
}

// infoFields parses the key:value lines of an INFO reply.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			m[k] = v
		}
	}
	return m
}
