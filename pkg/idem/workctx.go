package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A work's context ends at its deadline by the monotonic clock, timer or not. The runtime fires a
// context's deadline timer some time after the deadline: a process stopped past it (a Lambda
// environment frozen between invocations, a SIGSTOP, a long pause) resumes with its goroutines
// running before the timer does, and a plain context.WithDeadline then answers Err() == nil
// well past the deadline, when another owner may already hold the key. workContext compares the
// clock with the deadline on every Err and Done, and ends the context there if the timer has not.

// workDeadline is the deadline that the works of one claim (one Do, one DoBatch) share. Its
// timer, a context.WithDeadline of the caller's context, is made when a work first asks for Done
// (or finds the context ended): a work that never waits on its context (a computation, a write
// to memory) costs no timer, and its Err still reads the clock.
type workDeadline struct {
	// parent is the caller's context.
	parent context.Context
	// at is the deadline with a monotonic clock reading.
	at time.Time
	// early is set when Err or Done found the deadline passed before the timer did.
	early atomic.Bool
	// released is set by release: the works are over.
	released atomic.Bool
	mu       sync.Mutex // held while timed is made
	timed    atomic.Pointer[timedContext]
}

// timedContext is a workDeadline's context.WithDeadline and its cancel function.
type timedContext struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// timer returns d's timed context, making it on first use.
func (d *workDeadline) timer() *timedContext {
	if t := d.timed.Load(); t != nil {
		return t
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.timed.Load(); t != nil {
		return t
	}
	ctx, cancel := context.WithDeadline(d.parent, d.at) // past the deadline: ended, no timer
	if d.released.Load() {
		cancel()
	}
	t := &timedContext{ctx, cancel}
	d.timed.Store(t)
	return t
}

// release ends the works' context, as the CancelFunc of a context.WithDeadline does.
func (d *workDeadline) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.released.Store(true)
	if t := d.timed.Load(); t != nil {
		t.cancel()
	}
}

// expired reports whether the deadline has passed, ending t if its timer has not yet.
func (d *workDeadline) expired(t *timedContext) bool {
	if time.Now().Before(d.at) {
		return false
	}
	if t.ctx.Err() == nil {
		d.early.Store(true)
		t.cancel()
	}
	return true
}

// workContext is the context a work runs with: the caller's, ending at the work's deadline,
// carrying the claim's fencing token when the guard has fencing.
type workContext struct {
	d      *workDeadline
	fence  uint64
	fenced bool
	own    workDeadline // d for a context that shares its deadline with no other
}

// newWorkDeadline sets d to the deadline at of a claim's works, which derive from ctx.
func newWorkDeadline(ctx context.Context, at time.Time, d *workDeadline) {
	now := time.Now()
	d.parent = ctx
	d.at = now.Add(at.Sub(now)) // the same instant, read on the monotonic clock
}

// newWorkContext returns the context of a work that has the claim's deadline to itself; its
// release ends it.
func newWorkContext(ctx context.Context, at time.Time, c *call, fenced bool) *workContext {
	w := &workContext{fence: c.fence, fenced: fenced}
	w.d = &w.own
	newWorkDeadline(ctx, at, w.d)
	return w
}

// release ends the context, and its timer if it has one, as a context's CancelFunc does.
func (w *workContext) release() { w.d.release() }

// Deadline is the work's deadline, or the caller's when it comes first.
func (w *workContext) Deadline() (time.Time, bool) {
	if parent, ok := w.d.parent.Deadline(); ok && parent.Before(w.d.at) {
		return parent, true
	}
	return w.d.at, true
}

// Err reports DeadlineExceeded as soon as the deadline has passed by the monotonic clock.
func (w *workContext) Err() error {
	d := w.d
	t := d.timed.Load()
	if t == nil {
		if !d.released.Load() && d.parent.Err() == nil && time.Now().Before(d.at) {
			return nil
		}
		t = d.timer() // ended: the timed context says how
	}
	err := t.ctx.Err()
	switch {
	case err == nil && d.expired(t):
		return context.DeadlineExceeded
	case err != nil && d.early.Load():
		return context.DeadlineExceeded
	}
	return err
}

// Done returns a channel that is closed at the latest when Done is called past the deadline.
func (w *workContext) Done() <-chan struct{} {
	t := w.d.timer()
	if t.ctx.Err() == nil {
		w.d.expired(t)
	}
	return t.ctx.Done()
}

// Value returns the claim's fencing token for FenceFrom's key, and none in a guard without
// fencing (even when the caller's context carries one), so a token never outlives its claim.
func (w *workContext) Value(key any) any {
	if _, ok := key.(fenceKey); ok {
		if w.fenced {
			return w.fence
		}
		return nil
	}
	if t := w.d.timed.Load(); t != nil {
		return t.ctx.Value(key)
	}
	return w.d.parent.Value(key)
}
