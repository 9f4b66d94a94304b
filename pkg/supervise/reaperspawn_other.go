//go:build !linux

package supervise

import "os"

// spawn is never called here (reaperSupported is false).
func (pl *ReaperPool) spawn(spawnRequest, [3]*os.File, *os.File, *invocation, *os.File) (*reaperConn, int, error) {
	return nil, 0, &StartError{Reason: "reaper not supported"}
}
