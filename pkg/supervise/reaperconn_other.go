//go:build !linux

package supervise

// reaperConn is never used here: reapers are Linux only.
type reaperConn struct{}

func (*reaperConn) stop() {}

func (*reaperConn) signal(byte) {}

func (*reaperConn) read() (reply, error) { return reply{}, errReaperMsg }

func (*reaperConn) kill() {}

func (*reaperConn) guarded() bool { return false }

func (*reaperConn) disarm() {}
