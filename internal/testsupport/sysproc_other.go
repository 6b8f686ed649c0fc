//go:build !linux

package testsupport

import "syscall"

// childSysProcAttr returns nil: outside Linux there is no parent-death signal, and children are
// only stopped by t.Cleanup.
func childSysProcAttr() *syscall.SysProcAttr {
	return nil
}
