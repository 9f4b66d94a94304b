package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// A listening per-user manager or session bus socket is found in the
// runtime directory and through the bus address; a stale socket file, a
// plain file and an abstract address are not.
func TestReachableUserManager(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"XDG_RUNTIME_DIR": dir}
	getenv := func(k string) string { return env[k] }
	uid := -1 // /run/user/-1 exists nowhere

	if got := ReachableUserManager(uid, getenv); got != "" {
		t.Fatalf("empty runtime directory: %q", got)
	}
	// A socket whose listener is gone, and a plain file named bus.
	stale := filepath.Join(dir, "systemd", "private")
	if err := os.MkdirAll(filepath.Dir(stale), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if err := os.WriteFile(filepath.Join(dir, "bus"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ReachableUserManager(uid, getenv); got != "" {
		t.Fatalf("stale socket and plain file: %q", got)
	}

	os.Remove(stale)
	live, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if got := ReachableUserManager(uid, getenv); got != stale {
		t.Fatalf("listening manager: %q, want %q", got, stale)
	}
	live.Close()

	bus := filepath.Join(t.TempDir(), "session-bus")
	b, err := net.Listen("unix", bus)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	env = map[string]string{"DBUS_SESSION_BUS_ADDRESS": "unix:abstract=/tmp/dbus-x;unix:guid=1,path=" + bus}
	if got := ReachableUserManager(uid, getenv); got != bus {
		t.Fatalf("session bus by address: %q, want %q", got, bus)
	}
	env = map[string]string{"DBUS_SESSION_BUS_ADDRESS": "unix:abstract=/tmp/dbus-x"}
	if got := ReachableUserManager(uid, getenv); got != "" {
		t.Fatalf("abstract address: %q", got)
	}
}
