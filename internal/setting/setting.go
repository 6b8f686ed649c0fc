// Package setting holds the one error type every package of this module returns for a missing
// or malformed environment setting, so that a function's init can name the variable at fault
// (with errors.As) whichever package read it.
package setting

import "fmt"

// Error reports a setting that is missing or malformed. Var is the environment variable;
// Reason says what is wrong with its value, never the value itself when it may be a secret.
type Error struct {
	Var    string
	Reason string
}

// Error returns "VAR: reason".
func (e *Error) Error() string { return e.Var + ": " + e.Reason }

// Errorf returns an *Error for variable name, its reason formatted as fmt.Sprintf does.
func Errorf(name, format string, args ...any) *Error {
	return &Error{Var: name, Reason: fmt.Sprintf(format, args...)}
}
