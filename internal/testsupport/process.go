package testsupport

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is one running child process whose output is kept for diagnostics.
type process struct {
	cmd  *exec.Cmd
	out  *Buffer
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // result of cmd.Wait, valid once done is closed
}

// startProcess starts name with args. The process is killed if the test binary dies (on Linux),
// so an aborted test run does not leave servers behind.
func startProcess(name string, args ...string) (*process, error) {
	cmd := exec.Command(name, args...)
	out := &Buffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has already exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how an exited process ended; call it only after exited reports true.
func (p *process) exitError() error {
	if p.err == nil {
		return errors.New("process exited with status 0")
	}
	return fmt.Errorf("process exited: %w", p.err)
}

// stop sends SIGTERM and waits for the process to exit, escalating to SIGKILL after grace.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.cmd.Path, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		return p.kill()
	}
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *process) kill() error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.cmd.Path, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kill %s: process %d did not exit", p.cmd.Path, p.cmd.Process.Pid)
	}
}

// output returns what the process has written so far, trimmed to its last lines.
func (p *process) output() string {
	const limit = 4 << 10
	b := p.out.Bytes()
	if len(b) > limit {
		b = b[len(b)-limit:]
	}
	return string(bytes.TrimSpace(b))
}

// Buffer is a bytes.Buffer safe for concurrent writers and readers: for the output of a
// process or the log lines of handlers serving requests in parallel.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of the buffered bytes.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns the buffered bytes as a string.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mkdir creates dir and its parents.
func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
