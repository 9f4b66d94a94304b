package worker

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/0k-lab/agent-forge/pkg/sandbox"
)

// The sandbox every plugin invocation and every scoped check runs in
// (DECISIONS.md 14, docs/sandbox.md). Its rules are made here, in one
// place, from the Worker's configuration and the attempt's directories:
//
//   - read and execute: the system trees a toolchain needs (systemRO),
//     every entry of /etc except the installation's own directory and
//     anything holding the Worker's config or roots, /proc and /sys, the
//     program being started (the plugin's executable or the check's
//     program: its file as the reaper opens it to execute it), and the
//     operator's sandbox_read_paths;
//   - read and write, as devices: /dev/null, /dev/zero, /dev/full,
//     /dev/random, /dev/urandom and /dev/tty;
//   - read and write: the invocation's private directory (a plugin's run
//     directory, a check's HOME, TMPDIR and XDG_CACHE_HOME) and, for a
//     coding attempt, the attempt's own directories (sandboxDirs).
//
// Nothing else: not the Worker's other attempts, roots, config or token,
// not the Gate's state, not /tmp or any home directory.

// MaxSandboxReadPaths bounds sandbox_read_paths.
const MaxSandboxReadPaths = 64

// systemRO are the system trees read (and executed) inside the sandbox;
// the ones a system lacks are skipped.
var systemRO = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys"}

// devices are read and written inside the sandbox, when present.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// installConfigDir is the installation's own configuration directory
// (install.ConfigDir): its env files hold the tokens.
const installConfigDir = "/etc/agent-forge"

func parseSandbox(c *Config, fc *fileConfig) error {
	switch fc.Sandbox {
	case "", SandboxLandlock:
		c.Sandbox = SandboxLandlock
	case SandboxUnscoped, SandboxNone:
		c.Sandbox = fc.Sandbox
	default:
		return fieldErr("sandbox", `must be "landlock", "landlock-unscoped" or "none"`)
	}
	if len(fc.SandboxReadPaths) > MaxSandboxReadPaths {
		return fieldErr("sandbox_read_paths", "too many entries")
	}
	if c.Sandbox == SandboxNone && len(fc.SandboxReadPaths) > 0 {
		return fieldErr("sandbox_read_paths", `has no effect with "sandbox": "none"`)
	}
	private := c.privatePaths()
	for i, p := range fc.SandboxReadPaths {
		field := fmt.Sprintf("sandbox_read_paths[%d]", i)
		if !canonicalAbs(p) || p == "/" {
			return fieldErr(field, "not a canonical absolute path")
		}
		if j := slices.Index(c.SandboxReadPaths, p); j >= 0 {
			return fieldErr(field, fmt.Sprintf("duplicates sandbox_read_paths[%d]", j))
		}
		for _, q := range private {
			if within(p, q) || within(q, p) {
				return fieldErr(field, "overlaps a Worker root (repository_roots, worktree_root or runtime_root)")
			}
		}
		if within(p, installConfigDir) || within(installConfigDir, p) {
			return fieldErr(field, "overlaps the installation's configuration directory")
		}
		c.SandboxReadPaths = append(c.SandboxReadPaths, p)
	}
	return nil
}

// privatePaths are the Worker's own trees that no rule may grant as a
// whole: the sandbox grants only an attempt's own directories in them.
func (c *Config) privatePaths() []string {
	out := slices.Clone(c.RepositoryRoots)
	return append(out, c.WorktreeRoot, c.RuntimeRoot)
}

// unreadable are the paths no read rule may reach, in /etc or through a
// symbolic link: the private trees and the Worker's config.
func (c *Config) unreadable() []string {
	private := c.privatePaths()
	if c.ConfigPath != "" {
		private = append(private, c.ConfigPath)
	}
	return private
}

// checkSandboxHost checks the sandbox against this machine: every read
// path exists and is canonical, and, unless the config opts out,
// Landlock is there at an ABI the mode accepts (sandbox.Accepts). It
// returns the Landlock ABI in use (0 with "none").
func checkSandboxHost(c *Config) (int, error) { return checkSandboxABI(c, sandbox.ABI()) }

// checkSandboxABI is checkSandboxHost on a kernel whose Landlock ABI is
// abi (0: none).
func checkSandboxABI(c *Config, abi int) (int, error) {
	for i, p := range c.SandboxReadPaths {
		if _, err := os.Stat(p); err != nil {
			return 0, fieldErr(fmt.Sprintf("sandbox_read_paths[%d]", i), "does not exist")
		}
		if real, err := filepath.EvalSymlinks(p); err != nil || real != p {
			return 0, fieldErr(fmt.Sprintf("sandbox_read_paths[%d]", i), "path is not canonical (symlink in path)")
		}
	}
	if c.Sandbox == SandboxNone {
		return 0, nil
	}
	switch {
	case abi < 1:
		return 0, fieldErr("sandbox", `Landlock is not available on this system; set "sandbox": "none" to run plugins and checks unconfined`)
	case abi < sandbox.MinABIUnscoped:
		return 0, fieldErr("sandbox", fmt.Sprintf(`Landlock ABI %d on this kernel does not govern TCP connections (ABI %d, Linux 6.7, needed); set "sandbox": "none" to run plugins and checks unconfined`,
			abi, sandbox.MinABIUnscoped))
	case !sandbox.Accepts(c.Sandbox, abi):
		return 0, fieldErr("sandbox", fmt.Sprintf(`Landlock ABI %d on this kernel cannot keep sandboxed programs from signalling the Worker and other processes of its account (ABI %d, Linux 6.12, needed); set "sandbox": "landlock-unscoped" to accept that, or "none"`,
			abi, sandbox.MinABI))
	}
	return abi, nil
}

// SandboxABI is the Landlock ABI the Worker's sandbox uses, 0 when the
// config says "none". CheckHost has made sure it is available.
func SandboxABI(c *Config) int {
	if c.Sandbox == SandboxNone {
		return 0
	}
	return sandbox.ABI()
}

// sandboxRules makes the policies of one Worker. A nil *sandboxRules
// (the config says "none") makes none. It is safe for concurrent use.
//
// Every policy shares one sandbox.Shared, which the reapers keep prepared:
// the rules every policy starts with and the shared read layer
// (sandbox.Shared's Readable). The rules grant /etc as a whole (one rule
// instead of one per entry: each rule costs every start a system call)
// and the layer takes the left-out /etc entries back out (none when
// nothing in /etc is left out). When one of the Worker's own paths lies in
// /etc the rules list /etc's entries one by one instead.
//
// A prepared rule holds on to what its path named when it was prepared: a
// file replaced since (an /etc/passwd rewritten by rename) would stay
// unreadable. So the Shared is made again, and prepared again, whenever a
// directory holding one of its paths has changed: / and /etc (whose
// entries the rules list), /dev and the directories of the read paths and
// of the symbolic links' targets (sharedRules). Every policy asks, so the
// asking must cost next to nothing: on Linux an inotify instance watches
// the directories, their ancestors and the mount table (dirWatch) and an
// unchanged state is one ppoll; where inotify cannot be had (no instance
// or watch left, another system) each directory is stated instead. Either
// way the Shared is stamped with the directories' stat and a count of the
// makes, so that a reaper never keeps a Shared made before a change.
//
// Its inotify descriptors live as long as it does: they are closed when
// it is collected, and made again (the old ones closed) by every make.
type sandboxRules struct {
	cfg *Config

	mu     sync.Mutex
	shared *sandbox.Shared
	watch  []string   // the directories holding the shared paths
	seen   []dirState // their state when shared was made
	notify *dirWatch  // nil or not armed: stat watch instead
	made   int        // the makes so far
}

// newSandboxRules lists the rules every policy of c shares; / and /etc
// are read here, and again when they change.
func newSandboxRules(c *Config) *sandboxRules { return newSandboxRulesWith(c, true) }

// newSandboxRulesWith is newSandboxRules, watching with inotify only when
// notify is set.
func newSandboxRulesWith(c *Config, notify bool) *sandboxRules {
	if c.Sandbox == SandboxNone {
		return nil
	}
	s := &sandboxRules{cfg: c}
	if notify {
		s.notify = newDirWatch()
		runtime.AddCleanup(s, (*dirWatch).close, s.notify)
	}
	s.make()
	return s
}

// current returns the Shared, made again when a watched directory
// changed.
func (s *sandboxRules) current() *sandbox.Shared {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notify != nil && s.notify.armed() {
		if s.notify.changed() {
			s.make()
		}
		return s.shared
	}
	for i, d := range s.watch {
		if statDir(d) != s.seen[i] {
			s.make()
			break
		}
	}
	return s.shared
}

// make makes the Shared again, and notes the state of the directories
// that hold its paths (watches them afresh, or stats them). / and /etc,
// whose entries the rules list, are noted before they are read, so that a
// change while they are read shows at the next policy; the paths
// themselves are opened by the reapers, after the notes.
func (s *sandboxRules) make() {
	notify := s.notify != nil && s.notify.open() == nil && s.notify.add("/", "/etc") == nil
	listed := map[string]dirState{"/": statDir("/"), "/etc": statDir("/etc")}
	var rules, readable []sandbox.Rule
	rules, readable, s.watch = sharedRules(s.cfg)
	if notify = notify && s.notify.add(s.watch...) == nil; !notify && s.notify != nil {
		s.notify.close()
	}
	s.seen = s.seen[:0]
	s.made++
	var stamp strings.Builder
	fmt.Fprintf(&stamp, "%d;", s.made)
	for _, d := range s.watch {
		st, ok := listed[d]
		if !ok {
			st = statDir(d)
		}
		s.seen = append(s.seen, st)
		fmt.Fprintf(&stamp, "%d.%d.%d;", st.dev, st.ino, st.mtime)
	}
	// Only a path longer than the sandbox allows fails here; the
	// policies then fail to start.
	s.shared, _ = sandbox.NewShared(rules, readable, stamp.String())
}

// dirState is what tells a directory's entries changed: its device and
// inode, and its modification time (set by every entry added, removed or
// renamed). The zero value stands for a directory that is missing.
type dirState struct {
	dev, ino uint64
	mtime    int64
}

// sharedRules makes the rules and the Readable layer of c's policies, and
// lists the directories to watch for them: / and /etc, and those holding
// their paths or, for a symbolic link, its target, outside /proc and /sys
// (whose entries the kernel makes).
func sharedRules(c *Config) (rules, readable []sandbox.Rule, watch []string) {
	ro := func(rules []sandbox.Rule, paths ...string) []sandbox.Rule {
		for _, p := range paths {
			rules = append(rules, sandbox.Rule{Path: p, Access: sandbox.ReadOnly, Optional: true})
		}
		return rules
	}
	etc := etcEntries(c)
	system := present(systemRO)
	rules = ro(nil, system...)
	if excluded("/etc", c.privatePaths()) {
		rules = ro(rules, etc...)
	} else {
		rules = ro(rules, "/etc")
		// A symbolic link out of /etc (resolv.conf into /run, say) leads
		// where the /etc rule does not reach: its target gets a rule,
		// unless a system tree holds it already (localtime, os-release).
		for _, p := range etc {
			if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				if real, err := filepath.EvalSymlinks(p); err == nil && !within(real, "/etc") &&
					!slices.ContainsFunc(system, func(q string) bool { return within(real, q) }) {
					rules = ro(rules, real)
				}
			}
		}
	}
	for _, p := range present(devices) {
		rules = append(rules, sandbox.Rule{Path: p, Access: sandbox.Device, Optional: true})
	}
	rules = ro(rules, c.SandboxReadPaths...)
	// The shared read layer costs every start a copy of its rules: only
	// when /etc holds something to leave out (the installation's
	// directory, the Worker's config).
	if all, err := os.ReadDir("/etc"); err != nil || len(all) != len(etc) {
		layer := etc
		if ents, err := entriesExcept("/", "etc"); err == nil {
			layer = append(slices.Clip(layer), ents...)
		}
		readable = ro(nil, direct(layer, c)...)
	}
	watch = []string{"/", "/etc"} // for entries added to them
	for _, r := range append(slices.Clip(rules), readable...) {
		watch = append(watch, filepath.Dir(r.Path))
		if real, err := filepath.EvalSymlinks(r.Path); err == nil && real != r.Path {
			watch = append(watch, filepath.Dir(real))
		}
	}
	watch = slices.DeleteFunc(watch, func(d string) bool { return within(d, "/proc") || within(d, "/sys") })
	slices.Sort(watch)
	return rules, readable, slices.Compact(watch)
}

// direct keeps the read layer's paths but its symbolic links whose
// target another of them holds already (a rule lands on its path's
// target: on a merged /usr, /bin is /usr/bin; /etc/localtime is in /usr)
// or whose target lies where the layer must not reach (the installation's
// directory, the Worker's config and roots): every rule of the layer is
// copied into every domain.
func direct(paths []string, c *Config) []string {
	private := c.unreadable()
	return slices.DeleteFunc(slices.Clone(paths), func(p string) bool {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return false
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || within(real, installConfigDir) || excluded(real, private) {
			return true
		}
		return slices.ContainsFunc(paths, func(q string) bool { return q != p && within(real, q) })
	})
}

// present keeps the paths that exist, except symbolic links into another
// of them (on a merged /usr, /bin is /usr/bin): every rule costs every
// start, and such a rule grants nothing more.
func present(paths []string) []string {
	var out []string
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if real != p && slices.ContainsFunc(paths, func(q string) bool { return q != p && within(real, q) }) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// etcEntries are the /etc entries the sandbox reads: all but the
// installation's directory and any entry that holds (or, as a symbolic
// link, leads into) the Worker's config file or one of its roots.
func etcEntries(c *Config) []string {
	ents, err := os.ReadDir("/etc")
	if err != nil {
		return nil
	}
	private := c.unreadable()
	var out []string
	for _, e := range ents {
		p := "/etc/" + e.Name()
		if p == installConfigDir || excluded(p, private) {
			continue
		}
		if e.Type()&os.ModeSymlink != 0 {
			real, err := filepath.EvalSymlinks(p)
			if err != nil || real == installConfigDir || within(real, installConfigDir) || excluded(real, private) {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// excluded reports whether granting p would grant one of private.
func excluded(p string, private []string) bool {
	return slices.ContainsFunc(private, func(q string) bool { return within(q, p) || within(p, q) })
}

// policy returns the policy of one invocation: the shared rules and its
// directories. The program it starts gets its rule from the reaper that
// starts it, on the file the reaper opens and executes
// (sandbox.Policy.Program): a rule by name here would be resolved again
// there, after whatever renamed a symbolic link in between. Nil when the
// Worker runs without a sandbox.
func (s *sandboxRules) policy(dirs sandboxDirs) *sandbox.Policy {
	if s == nil {
		return nil
	}
	var rules []sandbox.Rule
	for _, p := range dirs.ro {
		rules = append(rules, sandbox.Rule{Path: p, Access: sandbox.ReadOnly, Optional: true})
	}
	for _, p := range dirs.rw {
		rules = append(rules, sandbox.Rule{Path: p, Access: sandbox.ReadWrite})
	}
	return &sandbox.Policy{Shared: s.current(), Rules: rules}
}

// reaching is p letting its program connect to eps (over TCP, on
// loopback) and nowhere else, counting what it refuses in refusals; nil
// stays nil (no sandbox).
func reaching(p *sandbox.Policy, eps []netip.AddrPort, refusals *sandbox.Refusals) *sandbox.Policy {
	if p != nil {
		p.Connect = slices.Clone(eps)
		p.Refusals = refusals
	}
	return p
}

// sandboxDirs are an invocation's own directories: rw read and written,
// ro only read.
type sandboxDirs struct {
	rw, ro []string
}

// with returns d plus the private directories rw.
func (d sandboxDirs) with(rw ...string) sandboxDirs {
	return sandboxDirs{rw: append(slices.Clip(d.rw), rw...), ro: d.ro}
}

// sandboxDirs are the directories of a coding attempt (AttemptDirs)
// inside the sandbox of its plugin and checks, for either layout.
//
// Read and write: the attempt's private container (its workspace and, on
// a Gate registration, its own repository) and its git directory when
// that lies outside the container (a static registration's worktree
// administrative directory, where git keeps the worktree's index and
// HEAD). Read only: the shared objects it borrows and the object
// directories their alternates name; for a static registration also the
// rest of the repository's common git directory, entry by entry (refs,
// config, hooks, ...) except its worktrees directory, which holds the
// other attempts' administrative directories, and for a non-bare one its
// main working tree, entry by entry except .git (agents such as Codex
// read project files at the repository's root). Nothing of the Worker's
// other attempts, repositories or caches. Called once preparation made
// the attempt's directories.
func (j *codingJob) sandboxDirs() (sandboxDirs, error) {
	a := j.Dirs()
	if a.Container == "" {
		return sandboxDirs{}, errors.New("attempt directories missing")
	}
	d := sandboxDirs{rw: []string{a.Container}, ro: []string{a.SharedObjects}}
	if !within(a.GitDir, a.Container) {
		d.rw = append(d.rw, a.GitDir)
		common := filepath.Dir(a.SharedObjects)
		ents, err := entriesExcept(common, "worktrees")
		if err != nil {
			return sandboxDirs{}, err
		}
		d.ro = append(d.ro, ents...)
		if top := filepath.Dir(common); filepath.Base(common) == ".git" && top == j.repo.path {
			ents, err := entriesExcept(top, ".git")
			if err != nil {
				return sandboxDirs{}, err
			}
			d.ro = append(d.ro, ents...)
		}
	}
	alt, err := readAttemptFile(filepath.Join(a.SharedObjects, "info", "alternates"), maxMetaFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return sandboxDirs{}, err
	}
	for _, line := range strings.Split(string(alt), "\n") {
		if filepath.IsAbs(line) && filepath.Clean(line) == line && !excluded(line, []string{j.x.cfg.WorktreeRoot}) {
			d.ro = append(d.ro, line)
		}
	}
	return d, nil
}

// entriesExcept lists the paths of dir's entries but the one named skip.
func entriesExcept(dir, skip string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Name() != skip {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
