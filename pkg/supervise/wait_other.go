//go:build !linux

package supervise

// reaperSupported reports whether Command.Reaper is honoured here.
const reaperSupported = false

// awaitExitNoReap is unavailable here: the group is cleaned up only on
// cancellation, while the leader is known to be unreaped.
func awaitExitNoReap(int) bool { return false }

// ReaperMain is not supported on this system; supervise never starts it
// here. It returns a nonzero status.
func ReaperMain(args []string) int { return reaperUsage }

const reaperUsage = 125
