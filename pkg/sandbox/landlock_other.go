//go:build !linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ErrUnavailable reports a system without Landlock: every system but Linux.
var ErrUnavailable = errors.New("landlock is not available")

// ABI returns 0: there is no Landlock here.
func ABI() int { return 0 }

// Scoped reports false: there is no Landlock here.
func Scoped(int) bool { return false }

// Cache is inert here.
type Cache struct{}

// Close does nothing here.
func (*Cache) Close() {}

// RestrictThread always fails here.
func RestrictThread(p *Policy, _ *Cache) (int, error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	return 0, ErrUnavailable
}

// OpenProgram always fails here.
func OpenProgram(string) (*Program, error) { return nil, ErrUnavailable }

// AdoptProgram always fails here (and closes fd).
func AdoptProgram(fd int, _ string) (*Program, error) {
	os.NewFile(uintptr(fd), "").Close()
	return nil, ErrUnavailable
}

// ErrOutside: the name given to OpenBeneath leads out of its directory.
var ErrOutside = errors.New("the name leads out of its directory")

// OpenBeneath opens name beneath dir for reading, refusing a name whose
// symbolic links lead out of dir (ErrOutside). Without openat2's
// RESOLVE_BENEATH the links are resolved by name first, so a link swapped
// meanwhile is not caught: there is no sandbox here to protect anyway.
func OpenBeneath(dir *os.File, name string) (*os.File, error) {
	if name == "" || filepath.IsAbs(name) {
		return nil, ErrOutside
	}
	base, err := filepath.EvalSymlinks(dir.Name())
	if err != nil {
		return nil, err
	}
	p, err := filepath.EvalSymlinks(filepath.Join(dir.Name(), name))
	if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(base, p); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, ErrOutside
	}
	return os.Open(p)
}

// ExecPath is the path given; nothing opens a program here.
func (pr *Program) ExecPath() string { return pr.path }

// Close does nothing here.
func (*Program) Close() {}

// ProtectSelf does nothing here.
func ProtectSelf() error { return nil }
