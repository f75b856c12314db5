package testserver

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server end if the test binary is killed before it stops it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
