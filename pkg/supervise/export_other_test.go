//go:build !linux

package supervise

// ReaperTestMain is ReaperMain; the sweep report exists only on Linux.
func ReaperTestMain(args []string) int { return ReaperMain(args) }
