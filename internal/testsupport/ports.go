package testsupport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
)

// freePort returns a loopback TCP port that was free a moment ago. Another process can still
// take it before the caller binds it, so callers retry with a new port when a server fails to
// start.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Cluster nodes need two ports: the client port p and the cluster bus port p+10000. Both are
// drawn from below Linux's default ephemeral range (32768-60999), so outgoing connections do not
// take them, and checked free together.
const (
	clusterPortMin = 12000
	clusterPortMax = 22000 // bus ports stay below 32000
	clusterBusGap  = 10000
)

// freeClusterPort returns a port p such that p and p+10000 are both free on 127.0.0.1 and p is
// not in avoid.
func freeClusterPort(avoid map[int]bool) (int, error) {
	for range 200 {
		p := clusterPortMin + rand.IntN(clusterPortMax-clusterPortMin)
		if avoid[p] || avoid[p+clusterBusGap] || avoid[p-clusterBusGap] {
			continue
		}
		if portFree(p) && portFree(p+clusterBusGap) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port pair p, p+%d in [%d, %d)", clusterBusGap, clusterPortMin, clusterPortMax)
}

// portFree reports whether a listener can bind 127.0.0.1:p right now.
func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
