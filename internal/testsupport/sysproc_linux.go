package testsupport

import "syscall"

// childSysProcAttr asks the kernel to kill the child when the test binary exits, even by SIGKILL.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
