package idem

// Observation is what a guard reports to its observer (WithObserver): a call whose work ran, or
// had run before, but whose result is not stored or not replayable.
type Observation struct {
	// Key is the call's key.
	Key Key
	// Outcome is the call's outcome; its Kind is LockLost, NotStored or NotReplayable.
	Outcome Outcome
	// Fence is the claim's fencing token (WithFencing), 0 without one.
	Fence uint64
	// Err is the guard's explanation, as Do returns it.
	Err error
}

// WithObserver calls observe after every Do, DoBatch item, and call of Wrap, idemsqs and idemhttp
// on the guard, whose Kind is LockLost, NotStored or NotReplayable: the outcomes after which a
// retry may run the work again, or gets no result, and which an operator wants in the logs. It
// runs on the caller's goroutine before Do returns, so it must be quick. Default none.
func WithObserver(observe func(Observation)) Option { return func(o *options) { o.observe = observe } }

// notify reports out to the guard's observer when it is one it watches.
func (g *Guard) notify(c *call, out Outcome, err error) {
	if g.opts.observe == nil {
		return
	}
	switch out.Kind {
	case LockLost, NotStored, NotReplayable:
		g.opts.observe(Observation{Key: c.key, Outcome: out, Fence: c.fence, Err: err})
	}
}
