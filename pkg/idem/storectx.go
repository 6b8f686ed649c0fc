package idem

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// A final store call's context ends at the claim's expiry (storeContext). context.WithDeadline
// would give every call a runtime timer of its own, made between the claim's reply and the store
// call: measured in pairs on loopback, with the vCPUs awake, that timer alone made a first
// execution 10% to 15% slower than the same two commands sent without it, far more than its CPU
// (BenchmarkPairFirstExecution; docs/benchmarks.md). The guard's store calls share one timer
// instead, an alarm set for the earliest pending deadline: a call whose deadline is later than
// the alarm's, the usual case (every claim of a guard has about the same TTL), touches no timer,
// and the alarm, once it rings, is set again for the earliest deadline still pending, if any.

// alarm ends the store contexts of one guard at their deadlines with one runtime timer.
type alarm struct {
	mu sync.Mutex
	// timer rings at armed; made on first use.
	timer *time.Timer
	// armed is when timer rings, the zero time when it is stopped or has rung.
	armed time.Time
	// pending are the store contexts not yet ended, the earliest deadline first.
	pending storeQueue
}

// storeCtx is a final store call's context: the caller's context's values without its
// cancellation, ending at its deadline. Like the work's context it reads the monotonic clock on
// Err and Done, so a process resumed after a pause sees it ended before the alarm has rung.
type storeCtx struct {
	parent context.Context
	at     time.Time
	done   chan struct{}
	alarm  *alarm
	// index is the context's place in alarm.pending, -1 once it has ended. Guarded by alarm.mu.
	index int
	// err is why the context ended, nil until then. Guarded by alarm.mu.
	err error
}

// start returns a context that ends at, for a store call whose parent is parent (already without
// its cancellation).
func (a *alarm) start(parent context.Context, at time.Time) *storeCtx {
	s := &storeCtx{parent: parent, at: at, done: make(chan struct{}), alarm: a}
	a.mu.Lock()
	defer a.mu.Unlock()
	heap.Push(&a.pending, s)
	if a.armed.IsZero() || at.Before(a.armed) {
		a.set(at)
	}
	return s
}

// set makes the alarm ring at at. a.mu is held.
func (a *alarm) set(at time.Time) {
	a.armed = at
	if a.timer == nil {
		a.timer = time.AfterFunc(time.Until(at), a.ring)
		return
	}
	a.timer.Reset(time.Until(at))
}

// ring ends the contexts whose deadline has passed and sets the alarm for the next one.
func (a *alarm) ring() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = time.Time{}
	now := time.Now()
	for len(a.pending) > 0 && !now.Before(a.pending[0].at) {
		a.end(a.pending[0], context.DeadlineExceeded)
	}
	if len(a.pending) > 0 {
		a.set(a.pending[0].at)
	}
}

// end ends s for err, if it has not ended yet. a.mu is held.
func (a *alarm) end(s *storeCtx, err error) {
	if s.index < 0 {
		return
	}
	heap.Remove(&a.pending, s.index)
	s.index = -1
	s.err = err
	close(s.done)
}

// release ends s, as a context's CancelFunc does. The alarm stays set: when it rings for a
// deadline no longer pending, it is set for the next one.
func (s *storeCtx) release() {
	s.alarm.mu.Lock()
	defer s.alarm.mu.Unlock()
	s.alarm.end(s, context.Canceled)
}

// Deadline is the store call's deadline.
func (s *storeCtx) Deadline() (time.Time, bool) { return s.at, true }

// Done is closed when the deadline has passed, at the latest when Done or Err is called past it.
func (s *storeCtx) Done() <-chan struct{} {
	s.expired()
	return s.done
}

// Err reports DeadlineExceeded as soon as the deadline has passed by the monotonic clock, and
// Canceled once the call is over.
func (s *storeCtx) Err() error {
	s.expired()
	s.alarm.mu.Lock()
	defer s.alarm.mu.Unlock()
	return s.err
}

// Value returns the caller's context's value for key.
func (s *storeCtx) Value(key any) any { return s.parent.Value(key) }

// expired ends s if its deadline has passed and the alarm has not rung yet.
func (s *storeCtx) expired() {
	if time.Now().Before(s.at) {
		return
	}
	s.alarm.mu.Lock()
	defer s.alarm.mu.Unlock()
	s.alarm.end(s, context.DeadlineExceeded)
}

// storeQueue is a heap of store contexts, the earliest deadline first (container/heap).
type storeQueue []*storeCtx

func (q storeQueue) Len() int           { return len(q) }
func (q storeQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q storeQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *storeQueue) Push(x any) {
	s := x.(*storeCtx)
	s.index = len(*q)
	*q = append(*q, s)
}

func (q *storeQueue) Pop() any {
	old := *q
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return s
}
