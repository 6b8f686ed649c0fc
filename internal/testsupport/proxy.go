package testsupport

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a loopback TCP proxy to one target address that injects faults: latency in either
// direction, dropped connections and a blackhole. Point a client at [Proxy.Addr] instead of the
// server. Its methods are safe for concurrent use and may be called from any goroutine.
type Proxy struct {
	target string
	ln     net.Listener

	mu         sync.Mutex
	toTarget   time.Duration // latency added to bytes sent by the client
	toClient   time.Duration // latency added to bytes sent by the target
	blackholed bool
	resumed    chan struct{} // closed by Resume; replaced by Blackhole
	links      map[*link]struct{}
	closed     bool

	wg sync.WaitGroup
}

// link is one proxied connection: the accepted client side and, once dialed, the target side.
type link struct {
	client   net.Conn
	mu       sync.Mutex
	upstream net.Conn
	done     chan struct{}
	once     sync.Once
}

// close closes both sides of the link once.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		l.mu.Lock()
		if l.upstream != nil {
			l.upstream.Close()
		}
		l.mu.Unlock()
	})
}

// StartProxy starts a proxy on a free port of 127.0.0.1 that forwards every accepted connection
// to target, with no fault injected. It is closed at cleanup.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsupport: proxy listen: %v", err)
	}
	resumed := make(chan struct{})
	close(resumed)
	p := &Proxy{target: target, ln: ln, resumed: resumed, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address clients connect to, "127.0.0.1:<port>".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk of bytes by toTarget on its way from the client to the target and
// by toClient on its way back, for existing and new connections. Chunks keep their order and are
// delayed independently, so latency does not limit throughput. Zero removes the delay.
func (p *Proxy) SetLatency(toTarget, toClient time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.toTarget, p.toClient = toTarget, toClient
}

// Drop closes every open connection, on both sides, as a server restart or a network reset
// would. New connections are still accepted and forwarded (unless the proxy is blackholed).
func (p *Proxy) Drop() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Blackhole stops forwarding: bytes from either side of open connections are held, and new
// connections are accepted but not connected to the target, so clients see a server that
// accepts and never answers (the failure a timeout must catch). Connections stay open until
// the client closes them, [Proxy.Drop] or [Proxy.Resume].
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.blackholed {
		p.blackholed = true
		p.resumed = make(chan struct{})
	}
}

// Resume ends a blackhole: held bytes are forwarded on the connections still open, and
// connections accepted meanwhile are connected to the target. Latency settings are unchanged.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blackholed {
		p.blackholed = false
		close(p.resumed)
	}
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines to end.
// It is called at cleanup; calling it again does nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Drop()
	p.wg.Wait()
}

// gate returns a channel that is closed when forwarding is allowed.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resumed
}

// latency returns the current delay for one direction.
func (p *Proxy) latency(toTarget bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if toTarget {
		return p.toTarget
	}
	return p.toClient
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(l)
	}
}

// serve connects l to the target once forwarding is allowed and pumps both directions until
// either side closes.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	select {
	case <-p.gate():
	case <-l.done:
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return // the client sees its connection closed, as with a refused connection
	}
	l.mu.Lock()
	l.upstream = up
	l.mu.Unlock()
	select {
	case <-l.done: // dropped while dialing
		up.Close()
		return
	default:
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(l, l.client, up, true) }()
	go func() { defer wg.Done(); p.pump(l, up, l.client, false) }()
	wg.Wait()
}

// chunk is bytes read from one side, with the time they are due at the other.
type chunk struct {
	data []byte
	due  time.Time
}

// pump copies src to dst, delaying each chunk by the direction's latency and holding it while the
// proxy is blackholed. When either side fails, the whole link is closed.
func (p *Proxy) pump(l *link, src, dst net.Conn, toTarget bool) {
	defer l.close()
	queue := make(chan chunk, 1024)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case queue <- chunk{data: buf[:n], due: time.Now().Add(p.latency(toTarget))}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				return // EOF, reset or closed by Drop: the link is closed either way
			}
		}
	}()
	for c := range queue {
		if d := time.Until(c.due); d > 0 {
			select {
			case <-time.After(d):
			case <-l.done:
				return
			}
		}
		select {
		case <-p.gate():
		case <-l.done:
			return
		}
		if _, err := dst.Write(c.data); err != nil {
			return
		}
	}
}
