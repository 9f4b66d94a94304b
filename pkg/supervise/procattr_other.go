//go:build !linux

package supervise

import "syscall"

// procAttr is the SysProcAttr of a started child (no reaper here).
func procAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
