package sandbox

import (
	"errors"
	"path/filepath"
	"strings"
)

// The values of worker.json's "sandbox": Landlock (also when absent) or
// none, the operator's explicit opt-out.
const (
	ModeLandlock = "landlock"
	ModeNone     = "none"
)

// Access is what a rule grants beneath its path.
type Access uint8

// The kinds of access a rule grants.
const (
	// ReadOnly: read files, list directories, execute programs.
	ReadOnly Access = iota + 1
	// ReadWrite: everything Landlock controls (create, remove, rename,
	// link within the granted trees, truncate, execute, device ioctls).
	ReadWrite
	// Device: read and write an existing file (for /dev/null and the
	// like); nothing can be created through it.
	Device
)

// MaxRules bounds a policy's rules.
const MaxRules = 1024

// MaxPathBytes bounds one rule's path.
const MaxPathBytes = 4096

// Rule grants Access beneath Path (the path itself and, for a directory,
// everything below it). An Optional rule whose path does not exist is
// skipped; a missing required path fails the restriction.
type Rule struct {
	Path     string
	Access   Access
	Optional bool
}

// Policy is what a sandboxed program may reach in the filesystem. Nothing
// outside its rules is reachable (see the package documentation for
// signals, abstract sockets and other processes).
//
// Readable, when Readable is set, narrows what Rules let it read and
// execute: a second Landlock layer that handles only reading and executing
// and allows them only beneath Readable's paths (their Access is ignored).
// It lets Rules grant a whole tree (all of /etc) while Readable leaves out
// a few entries of it (the installation's own directory), and it is the
// same for many policies: a Cache keeps it built across restrictions, so
// each start pays only for its own few Rules.
type Policy struct {
	Rules    []Rule
	Readable []Rule
}

var errPolicy = errors.New("sandbox policy is malformed")

// Check validates the policy's shape: at most MaxRules rules (and
// Readable rules), each with a
// known access and a clean absolute path of at most MaxPathBytes without
// NUL. The error is fixed text.
func (p *Policy) Check() error {
	if p == nil || len(p.Rules) > MaxRules || len(p.Readable) > MaxRules {
		return errPolicy
	}
	for _, r := range append(p.Rules[:len(p.Rules):len(p.Rules)], p.Readable...) {
		if r.Access < ReadOnly || r.Access > Device || r.Path == "" || len(r.Path) > MaxPathBytes ||
			strings.IndexByte(r.Path, 0) >= 0 || !filepath.IsAbs(r.Path) || filepath.Clean(r.Path) != r.Path {
			return errPolicy
		}
	}
	return nil
}
