package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A per-user service manager (systemd --user) and a session bus accept
// requests from every process of their account over pathname UNIX
// sockets, which Landlock does not govern: a sandboxed program that
// reached one could ask it to start a transient unit, a process with no
// Landlock domain, no guard and no cgroup of the attempt's. A sandboxed
// Worker therefore refuses to start while its account has one it can
// connect to (docs/sandbox.md, "Where the cgroup comes from").

// userManagerDial bounds one connection attempt.
const userManagerDial = 500 * time.Millisecond

// ReachableUserManager returns the first per-user service manager or
// session bus socket of the account with effective uid uid that a
// connection reaches, or "" when none does. It looks in the account's
// runtime directory (/run/user/UID, and XDG_RUNTIME_DIR when set) and at
// the session bus DBUS_SESSION_BUS_ADDRESS names by path. getenv reads
// the Worker's environment. Only a connection counts: a socket file left
// by a manager that is gone is harmless.
func ReachableUserManager(uid int, getenv func(string) string) string {
	dirs := []string{filepath.Join("/run/user", strconv.Itoa(uid))}
	if d := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		dirs = append(dirs, filepath.Clean(d))
	}
	var paths []string
	for _, d := range dirs {
		paths = append(paths, filepath.Join(d, "systemd", "private"), filepath.Join(d, "bus"))
	}
	paths = append(paths, sessionBusPaths(getenv("DBUS_SESSION_BUS_ADDRESS"))...)
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Type() != os.ModeSocket {
			continue
		}
		c, err := net.DialTimeout("unix", p, userManagerDial)
		if err == nil {
			c.Close()
			return p
		}
	}
	return ""
}

// sessionBusPaths returns the pathname sockets of a D-Bus address list
// ("unix:path=/run/user/1000/bus;..."); abstract ones are scoped by
// Landlock (ABI 6) and others are not sockets a program can name.
func sessionBusPaths(addr string) []string {
	var out []string
	for _, a := range strings.Split(addr, ";") {
		rest, ok := strings.CutPrefix(a, "unix:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if p, ok := strings.CutPrefix(kv, "path="); ok && filepath.IsAbs(p) {
				out = append(out, filepath.Clean(p))
			}
		}
	}
	return out
}
