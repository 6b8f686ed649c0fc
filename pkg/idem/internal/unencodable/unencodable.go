// Package unencodable tells the guard, from the work it runs, that the work ran and succeeded
// but that its value cannot be encoded for the store. The work's adapters (idem.Wrap, idemsqs)
// encode their values as JSON inside the work, after the side effect: an error there must not
// release the claim, or the next delivery would run the side effect again. It is internal so
// that the public packages share it without one more exported name.
package unencodable

// Error is the error of a work that ran and succeeded but whose value could not be encoded: the
// guard keeps a marker, "executed, not replayable", in place of a result and reports the call
// NotReplayable, exactly as for a result over the size limit.
type Error struct {
	// Err is the encoder's error, with the adapter's context.
	Err error
}

// Error returns the encoder's error text.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the encoder's error.
func (e *Error) Unwrap() error { return e.Err }
