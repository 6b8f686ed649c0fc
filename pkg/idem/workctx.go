package idem

import (
	"context"
	"sync/atomic"
	"time"
)

// A work's context ends at its deadline by the monotonic clock, timer or not. The runtime fires a
// context's deadline timer some time after the deadline: a process stopped past it (a Lambda
// environment frozen between invocations, a SIGSTOP, a long pause) resumes with its goroutines
// running before the timer does, and a plain context.WithDeadline then answers Err() == nil
// well past the deadline, when another owner may already hold the key. workContext compares the
// clock with the deadline on every Err and Done, and ends the context there if the timer has not.

// workDeadline is the deadline that the works of one claim (one Do, one DoBatch) share.
type workDeadline struct {
	cancel context.CancelFunc
	// at is the deadline with a monotonic clock reading.
	at time.Time
	// early is set when Err or Done found the deadline passed before the timer did.
	early atomic.Bool
}

// expired reports whether the deadline has passed, ending the context if the timer has not yet.
func (d *workDeadline) expired(inner context.Context) bool {
	if time.Now().Before(d.at) {
		return false
	}
	if inner.Err() == nil {
		d.early.Store(true)
		d.cancel()
	}
	return true
}

// workContext is the context a work runs with: the caller's, ending at the work's deadline,
// carrying the claim's fencing token when the guard has fencing.
type workContext struct {
	context.Context // a context.WithDeadline of the caller's context, at d.at
	d               *workDeadline
	fence           uint64
	fenced          bool
	own             workDeadline // d for a context that shares its deadline with no other
}

// newWorkDeadline returns the deadline, at, of a claim's works, and the context they derive
// from: ctx ending at at.
func newWorkDeadline(ctx context.Context, at time.Time, d *workDeadline) context.Context {
	now := time.Now()
	d.at = now.Add(at.Sub(now)) // the same instant, read on the monotonic clock
	inner, cancel := context.WithDeadline(ctx, d.at)
	d.cancel = cancel
	return inner
}

// newWorkContext returns the context of a work that has the claim's deadline to itself, and the
// function that releases its timer.
func newWorkContext(ctx context.Context, at time.Time, c *call, fenced bool) (*workContext, context.CancelFunc) {
	w := &workContext{fence: c.fence, fenced: fenced}
	w.d = &w.own
	w.Context = newWorkDeadline(ctx, at, w.d)
	return w, w.own.cancel
}

// Err reports DeadlineExceeded as soon as the deadline has passed by the monotonic clock.
func (w *workContext) Err() error {
	err := w.Context.Err()
	switch {
	case err == nil && w.d.expired(w.Context):
		return context.DeadlineExceeded
	case err != nil && w.d.early.Load():
		return context.DeadlineExceeded
	}
	return err
}

// Done returns a channel that is closed at the latest when Done is called past the deadline.
func (w *workContext) Done() <-chan struct{} {
	if w.Context.Err() == nil {
		w.d.expired(w.Context)
	}
	return w.Context.Done()
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
	return w.Context.Value(key)
}
