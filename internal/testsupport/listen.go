package testsupport

import (
	"net"
	"sync"
	"testing"
)

// Listen returns a TCP listener on a free port of 127.0.0.1, closed at cleanup.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsupport: listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Serve listens on a free port of 127.0.0.1 and runs handle, in a goroutine of its own, on
// every connection it accepts; it returns the address. At cleanup it stops accepting and
// closes every connection it accepted, so a handle that does nothing leaves a client
// connected to a server that never answers.
func Serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln := Listen(t)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go handle(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// ClosedAddr returns a loopback address on which nothing listens (as of a moment ago), so a
// dial to it is refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsupport: listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("testsupport: close listener: %v", err)
	}
	return addr
}
