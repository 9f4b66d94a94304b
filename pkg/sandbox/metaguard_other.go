//go:build !linux || !(amd64 || arm64)

package sandbox

import "errors"

// Guards is inert here.
type Guards struct{}

// Guard is inert here.
type Guard struct{}

// Start always fails here: there is no metadata filter for this platform
// (and off Linux no Landlock to pair it with).
func (*Guards) Start(p *Policy) (*Guard, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	return nil, errors.New("the metadata guard is not available on this platform")
}

// Close does nothing here.
func (*Guard) Close() {}
