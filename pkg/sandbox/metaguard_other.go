//go:build !linux || !(amd64 || arm64)

package sandbox

import "errors"

// Guard is inert here.
type Guard struct{}

// Serve always fails here: there is no metadata filter for this
// platform (and off Linux no Landlock to pair it with).
func Serve(fd int) (*Guard, error) { return nil, errNoGuard }

// Arm always fails here.
func (*Guard) Arm(p *Policy) error {
	if err := p.Check(); err != nil {
		return err
	}
	return errNoGuard
}

// Disarm does nothing here.
func (*Guard) Disarm() {}

// Close does nothing here.
func (*Guard) Close() {}

// GuardProcess always fails here.
func GuardProcess() (int, error) { return -1, errNoGuard }

var errNoGuard = errors.New("the metadata guard is not available on this platform")

// ProbeGuard always fails here.
func ProbeGuard() error { return errNoGuard }
