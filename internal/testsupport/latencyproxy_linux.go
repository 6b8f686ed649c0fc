package testsupport

import (
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// LatencyProxy is a loopback TCP proxy to one target address that delays every chunk of bytes by
// a fixed latency in each direction, to the microsecond: a round trip through it costs about
// twice the latency more than one to the target. [Proxy] delays with the Go runtime's timers,
// which sleep at least a millisecond when the process has nothing else to do, too coarse to
// model a network round trip of a few hundred microseconds; LatencyProxy sleeps in the kernel, on
// a thread of its own per direction of each connection, with a timer slack of one nanosecond.
// It is for benchmarks: it adds no fault.
type LatencyProxy struct {
	ln      net.Listener
	latency time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	wg sync.WaitGroup
}

// StartLatencyProxy starts a proxy on a free port of 127.0.0.1 that forwards every accepted
// connection to target, delaying each direction by latency. It is closed at cleanup.
func StartLatencyProxy(t testing.TB, target string, latency time.Duration) *LatencyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsupport: latency proxy listen: %v", err)
	}
	p := &LatencyProxy{ln: ln, latency: latency, conns: map[net.Conn]struct{}{}}
	p.wg.Go(func() { p.accept(target) })
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address clients connect to, "127.0.0.1:<port>".
func (p *LatencyProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the proxy's goroutines to end.
// It is called at cleanup; calling it again does nothing.
func (p *LatencyProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// track registers c to be closed by Close, or closes it at once when the proxy is closed.
func (p *LatencyProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *LatencyProxy) accept(target string) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		up, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client) || !p.track(up) {
			client.Close()
			up.Close()
			return
		}
		p.wg.Go(func() { p.forward(client, up) })
		p.wg.Go(func() { p.forward(up, client) })
	}
}

// forward copies src to dst, each chunk latency after it was read, until either side fails; then
// it closes both.
func (p *LatencyProxy) forward(src, dst net.Conn) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	const depth = 64
	queue := make(chan chunk, depth)
	free := make(chan []byte, depth) // buffers written out, to read into again: no allocation
	p.wg.Go(func() {
		defer close(queue)
		for {
			var buf []byte
			select {
			case buf = <-free:
			default:
				buf = make([]byte, 32<<10)
			}
			n, err := src.Read(buf[:cap(buf)])
			if n > 0 {
				queue <- chunk{buf[:n], time.Now().Add(p.latency)}
			}
			if err != nil {
				return
			}
		}
	})
	// This goroutine's thread sleeps in the kernel: lock it, and let it end with the goroutine
	// rather than go back to the runtime with its timer slack changed.
	runtime.LockOSThread()
	const prSetTimerSlack = 29
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	defer func() {
		src.Close()
		dst.Close()
		for range queue { // let the reader end
		}
	}()
	for c := range queue {
		for d := time.Until(c.due); d > 0; d = time.Until(c.due) {
			ts := syscall.NsecToTimespec(int64(d))
			_ = syscall.Nanosleep(&ts, nil)
		}
		if _, err := dst.Write(c.data); err != nil {
			return
		}
		select {
		case free <- c.data:
		default:
		}
	}
}
