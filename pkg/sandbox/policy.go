package sandbox

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// The values of worker.json's "sandbox": Landlock (also when absent);
// Landlock on a kernel that cannot scope it, the operator's explicit
// acceptance of a weaker sandbox; none, the operator's explicit opt-out.
const (
	ModeLandlock = "landlock"
	ModeUnscoped = "landlock-unscoped"
	ModeNone     = "none"
)

// The Landlock ABIs a sandbox needs. ModeLandlock needs MinABI (Linux
// 6.12): from it on a domain is scoped, so its programs cannot signal a
// process outside it or connect to an abstract UNIX socket made outside
// it. ModeUnscoped accepts MinABIUnscoped (Linux 6.7) and later, giving up
// that scoping; below it TCP connections are not governed (a program
// could connect to every port on loopback), and no mode accepts it.
const (
	MinABI         = 6
	MinABIUnscoped = 4
)

// Accepts reports whether a sandbox of mode (ModeLandlock or
// ModeUnscoped) may run at Landlock ABI abi; the mode none needs no ABI.
func Accepts(mode string, abi int) bool {
	switch mode {
	case ModeLandlock:
		return abi >= MinABI
	case ModeUnscoped:
		return abi >= MinABIUnscoped
	case ModeNone:
		return true
	}
	return false
}

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

// Policy is what a sandboxed program may reach in the filesystem: what
// Shared grants (when set) and Rules. Nothing outside them is reachable
// (see the package documentation for signals, abstract sockets and other
// processes).
type Policy struct {
	// Shared are the rules many policies have in common, built once.
	Shared *Shared
	// Rules are this policy's own: what one start adds to Shared.
	Rules []Rule
	// Connect are the TCP endpoints on loopback the program may connect
	// to (the Worker's gateway and proxy): it may connect to nothing
	// else, bind no TCP port, and create no socket but a UNIX one, a TCP
	// one (which only reaches loopback) and a routing netlink one; see
	// docs/sandbox.md. None: no TCP connection at all.
	Connect []netip.AddrPort
	// Refusals, when set, counts the connections refused to the program
	// (its guard adds to it). Like Program it is never carried with the
	// rules: it stays in the process that serves the guard.
	Refusals *Refusals
	// Program, when set, is the program about to be started, opened
	// (OpenProgram): the domain reads and executes that very file. It is
	// set by the process that starts the program, never carried with the
	// rules.
	Program *Program
}

// Program is a program's file opened once, by the process that is about
// to execute it (OpenProgram): the domain's rule for the program is made
// on this descriptor (Policy.Program) and the program is executed through
// it (ExecPath), so no name is resolved twice between the rule and the
// exec: a symbolic link swapped meanwhile can move neither the rule (onto
// "/", say) nor the exec.
type Program struct {
	fd     int
	path   string // as given, for a script
	script bool   // it starts with "#!"
}

// Shared is the part of many policies that is the same for all of them (a
// Worker's system paths, /etc, devices and read paths), made once by
// NewShared and never changed. A Cache keeps it prepared between
// restrictions: its paths opened, its Readable layer built, so that each
// start pays only for its own few Rules.
//
// Readable, when set, narrows what the rules let a program read and
// execute: a second Landlock layer that handles only reading and executing
// and allows them only beneath Readable's paths (their Access is ignored).
// It lets the rules grant a whole tree (all of /etc) while Readable leaves
// out a few entries of it (the installation's own directory).
type Shared struct {
	rules, readable []Rule
	stamp, key      string
}

// NewShared checks rules and readable (as Policy.Check does) and returns
// them as one Shared. Stamp is anything that must tell this Shared from
// another with the same rules (the state of the directories they were
// read from), at most MaxPathBytes without NUL; it only enters Key.
func NewShared(rules, readable []Rule, stamp string) (*Shared, error) {
	if len(stamp) > MaxPathBytes || strings.IndexByte(stamp, 0) >= 0 {
		return nil, errPolicy
	}
	if err := checkRules(rules); err != nil {
		return nil, err
	}
	if err := checkRules(readable); err != nil {
		return nil, err
	}
	s := &Shared{rules: slices.Clone(rules), readable: slices.Clone(readable), stamp: stamp}
	h := sha256.New()
	for _, list := range [][]Rule{s.rules, s.readable} {
		fmt.Fprintf(h, "%d\n", len(list))
		for _, r := range list {
			fmt.Fprintf(h, "%d %t %d %s\n", r.Access, r.Optional, len(r.Path), r.Path)
		}
	}
	fmt.Fprintf(h, "%d %s", len(stamp), stamp)
	s.key = string(h.Sum(nil))
	return s, nil
}

// KeyBytes is the length of Key.
const KeyBytes = sha256.Size

// Key identifies s: two Shared with the same Key have the same rules,
// readable rules and stamp. A nil Shared has the key "".
func (s *Shared) Key() string {
	if s == nil {
		return ""
	}
	return s.key
}

// Stamp returns the stamp NewShared was given.
func (s *Shared) Stamp() string {
	if s == nil {
		return ""
	}
	return s.stamp
}

// Rules returns the shared rules. The slice is s's own: callers must not
// change it.
func (s *Shared) Rules() []Rule {
	if s == nil {
		return nil
	}
	return slices.Clip(s.rules)
}

// Readable returns the Readable layer's rules. The slice is s's own:
// callers must not change it.
func (s *Shared) Readable() []Rule {
	if s == nil {
		return nil
	}
	return slices.Clip(s.readable)
}

var errPolicy = errors.New("sandbox policy is malformed")

// Check validates the policy's own rules: at most MaxRules, each with a
// known access and a clean absolute path of at most MaxPathBytes without
// NUL (NewShared checked Shared's), and its Connect endpoints: at most
// MaxConnect loopback addresses with a port, none twice. The error is
// fixed text.
func (p *Policy) Check() error {
	if p == nil {
		return errPolicy
	}
	if err := checkConnect(p.Connect); err != nil {
		return err
	}
	return checkRules(p.Rules)
}

func checkRules(rules []Rule) error {
	if len(rules) > MaxRules {
		return errPolicy
	}
	for _, r := range rules {
		if r.Access < ReadOnly || r.Access > Device || r.Path == "" || len(r.Path) > MaxPathBytes ||
			strings.IndexByte(r.Path, 0) >= 0 || !filepath.IsAbs(r.Path) || filepath.Clean(r.Path) != r.Path {
			return errPolicy
		}
	}
	return nil
}
