//go:build !linux

package supervise

// Cgroups is Linux only: elsewhere no subtree can be had.
type Cgroups struct{}

// invocation is never created here.
type invocation struct{}

var errCgroupsLinux = &CgroupError{Reason: "cgroups exist on Linux only"}

// OwnCgroup fails on this system.
func OwnCgroup() (string, error) { return "", errCgroupsLinux }

// DelegatedCgroups fails on this system.
func DelegatedCgroups() (*Cgroups, error) { return nil, errCgroupsLinux }

// NewCgroups fails on this system.
func NewCgroups(string) (*Cgroups, error) { return nil, errCgroupsLinux }

// Probe fails on this system.
func (*Cgroups) Probe() error { return errCgroupsLinux }

// Dir is empty on this system.
func (*Cgroups) Dir() string { return "" }

// Controllers is empty on this system.
func (*Cgroups) Controllers() []string { return nil }

// Close does nothing on this system.
func (*Cgroups) Close() {}

func (*Cgroups) create() (*invocation, error) { return nil, errCgroupsLinux }

func (*invocation) finish() bool { return true }

func (*invocation) abandon() {}

func openPidfd(int) int { return -1 }

func pidfdExited(int) bool { return true }
