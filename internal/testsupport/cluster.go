package testsupport

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterSlots is the number of hash slots in a Redis Cluster.
const ClusterSlots = 16384

// clusterNodeTimeout is cluster-node-timeout for test clusters, in milliseconds. It is short, so a
// killed master fails over within a few seconds, yet long enough that a busy 2-core machine does
// not cause spurious failovers.
const clusterNodeTimeout = 2000

// Cluster is a real Redis Cluster of redis-server processes on loopback ports, formed with
// redis-cli --cluster create. Its methods are safe for concurrent use.
type Cluster struct {
	t     testing.TB
	nodes []*RedisServer
}

// StartCluster starts masters*(1+replicasPerMaster) cluster-enabled redis-server processes,
// joins them into one cluster with redis-cli --cluster create (masters must be at least 3, as
// redis-cli requires), and waits until every node reports cluster_state:ok, all 16384 slots are
// assigned and every replica is in sync with its master. Nodes run without persistence and with
// cluster-node-timeout 2000 ms, so a killed master with a replica fails over in a few seconds.
// Each node's client port p and cluster bus port p+10000 are both checked free before use. All
// nodes are killed at cleanup. If redis-server or redis-cli is missing, or the cluster does not
// form, the test is skipped, or failed under CI (see [Unavailable]).
func StartCluster(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	if masters < 3 || replicasPerMaster < 0 {
		t.Fatalf("testsupport: StartCluster(%d, %d): need at least 3 masters and no negative replica count", masters, replicasPerMaster)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server not found in PATH: %v", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Unavailable(t, "redis-cli not found in PATH: %v", err)
	}

	c := &Cluster{t: t}
	used := map[int]bool{}
	pick := func(tried map[int]bool) (int, error) {
		avoid := map[int]bool{}
		for p := range used {
			avoid[p] = true
		}
		for p := range tried {
			avoid[p] = true
		}
		return freeClusterPort(avoid)
	}
	root := t.TempDir()
	for i := range masters * (1 + replicasPerMaster) {
		dir := filepath.Join(root, "node"+strconv.Itoa(i))
		args := []string{
			"--bind", "127.0.0.1", "--protected-mode", "no",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
			// Replicas sync at once instead of after the default 5 s wait for more replicas.
			"--repl-diskless-sync-delay", "0",
		}
		if err := mkdir(dir); err != nil {
			t.Fatalf("testsupport: %v", err)
		}
		s, err := startRedisServer(t, bin, args, pick)
		if err != nil {
			Unavailable(t, "cluster node %d did not start: %v", i, err)
		}
		used[s.Port()] = true
		c.nodes = append(c.nodes, s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createArgs := append([]string{"--cluster", "create"}, c.Addrs()...)
	createArgs = append(createArgs, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, createArgs...).CombinedOutput(); err != nil {
		Unavailable(t, "redis-cli --cluster create: %v; output:\n%s", err, out)
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		Unavailable(t, "cluster did not become ready: %v", err)
	}
	return c
}

// Addrs returns the addresses of all nodes, masters and replicas, in the order they were started.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the server of every node, in the order of [Cluster.Addrs], so a test can stop,
// kill or restart any one of them.
func (c *Cluster) Nodes() []*RedisServer { return slices.Clone(c.nodes) }

// NewClient returns a cluster client seeded with every node address, closed at cleanup.
func (c *Cluster) NewClient() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// Masters returns the addresses of the masters serving slots, ordered by the first slot each
// serves, as reported by CLUSTER SLOTS on the first running node that answers. After a failover
// the promoted replica takes its old master's place in the list.
func (c *Cluster) Masters() ([]string, error) {
	slots, err := c.slots()
	if err != nil {
		return nil, err
	}
	var masters []string
	for _, s := range slots {
		if len(s.Nodes) > 0 && !slices.Contains(masters, s.Nodes[0].Addr) {
			masters = append(masters, s.Nodes[0].Addr)
		}
	}
	return masters, nil
}

// NodeFor returns the address of the master serving slot, as reported by CLUSTER SLOTS on the
// first running node that answers. Use [KeySlot] to find a key's slot.
func (c *Cluster) NodeFor(slot int) (string, error) {
	if slot < 0 || slot >= ClusterSlots {
		return "", fmt.Errorf("slot %d out of range [0, %d)", slot, ClusterSlots)
	}
	slots, err := c.slots()
	if err != nil {
		return "", err
	}
	for _, s := range slots {
		if int(s.Start) <= slot && slot <= int(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("slot %d is not served by any node", slot)
}

// KillMaster kills (SIGKILL) the i-th master of [Cluster.Masters] and returns its address. If it
// has a replica, the cluster fails over after about cluster-node-timeout; call
// [Cluster.WaitReady] to wait for that.
func (c *Cluster) KillMaster(i int) (string, error) {
	masters, err := c.Masters()
	if err != nil {
		return "", err
	}
	if i < 0 || i >= len(masters) {
		return "", fmt.Errorf("master %d out of range: the cluster has %d masters", i, len(masters))
	}
	for _, n := range c.nodes {
		if n.Addr() == masters[i] {
			return masters[i], n.Kill()
		}
	}
	return "", fmt.Errorf("master %s is not a node of this cluster", masters[i])
}

// WaitReady waits until every running node reports cluster_state:ok with all 16384 slots
// assigned and ok, sees every slot served by a running master, and, if it is a replica of a
// running master, has its replication link up. It returns the last reason the cluster was not
// ready if timeout passes first.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var reason error
	for {
		if reason = c.ready(); reason == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ready returns nil if the cluster is ready in the sense of WaitReady, else why not.
func (c *Cluster) ready() error {
	running := map[string]bool{}
	for _, n := range c.nodes {
		running[n.Addr()] = n.Running()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if !running[n.Addr()] {
			continue
		}
		if err := nodeReady(ctx, n.Addr(), running); err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
	}
	return nil
}

// nodeReady checks one node's view of the cluster.
func nodeReady(ctx context.Context, addr string, running map[string]bool) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rc.Close()
	info, err := rc.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER INFO: %w", err)
	}
	fields := infoFields(info)
	for k, want := range map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(ClusterSlots),
		"cluster_slots_ok":       strconv.Itoa(ClusterSlots),
	} {
		if got := fields[k]; got != want {
			return fmt.Errorf("%s is %q, want %q", k, got, want)
		}
	}
	//lint:ignore SA1019 CLUSTER SLOTS works on every Redis version; CLUSTER SHARDS needs 7.0.
	slots, err := rc.ClusterSlots(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	for _, s := range slots {
		if len(s.Nodes) == 0 || !running[s.Nodes[0].Addr] {
			return fmt.Errorf("slots %d-%d are served by a node that is not running", s.Start, s.End)
		}
	}
	repl, err := rc.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("INFO replication: %w", err)
	}
	r := infoFields(repl)
	if r["role"] == "slave" {
		master := r["master_host"] + ":" + r["master_port"]
		if running[master] && r["master_link_status"] != "up" {
			return fmt.Errorf("replica of %s: master_link_status is %q", master, r["master_link_status"])
		}
	}
	return nil
}

// slots returns CLUSTER SLOTS from the first running node that answers.
func (c *Cluster) slots() ([]redis.ClusterSlot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second})
		//lint:ignore SA1019 CLUSTER SLOTS works on every Redis version; CLUSTER SHARDS needs 7.0.
		slots, err := rc.ClusterSlots(ctx).Result()
		rc.Close()
		if err == nil {
			slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return int(a.Start - b.Start) })
			return slots, nil
		}
		errs = append(errs, fmt.Errorf("CLUSTER SLOTS on %s: %w", n.Addr(), err))
	}
	if len(errs) == 0 {
		return nil, errors.New("no cluster node is running")
	}
	return nil, errors.Join(errs...)
}

// infoFields parses the "key:value" lines of INFO or CLUSTER INFO.
func infoFields(info string) map[string]string {
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// KeySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key, or of its hash
// tag (the part between the first "{" and the next "}", if non-empty), modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % ClusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
