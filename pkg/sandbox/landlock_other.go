//go:build !linux

package sandbox

import "errors"

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

// ExecPath is the path given; nothing opens a program here.
func (pr *Program) ExecPath() string { return pr.path }

// Close does nothing here.
func (*Program) Close() {}

// ProtectSelf does nothing here.
func ProtectSelf() error { return nil }
