package sandbox

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Landlock's system calls: the same numbers on every Linux architecture.
const (
	sysCreateRuleset = 444
	sysAddRule       = 445
	sysRestrictSelf  = 446
)

const (
	createRulesetVersion = 1 << 0 // LANDLOCK_CREATE_RULESET_VERSION
	rulePathBeneath      = 1      // LANDLOCK_RULE_PATH_BENEATH
	ruleNetPort          = 2      // LANDLOCK_RULE_NET_PORT
	prSetNoNewPrivs      = 38     // PR_SET_NO_NEW_PRIVS
	prSetDumpable        = 4      // PR_SET_DUMPABLE
	oPath                = 0x200000
)

// Filesystem access rights (LANDLOCK_ACCESS_FS_*) and the ABI that
// introduced the last of them.
const (
	fsExecute    = 1 << 0
	fsWriteFile  = 1 << 1
	fsReadFile   = 1 << 2
	fsReadDir    = 1 << 3
	fsRemoveDir  = 1 << 4
	fsRemoveFile = 1 << 5
	fsMakeChar   = 1 << 6
	fsMakeDir    = 1 << 7
	fsMakeReg    = 1 << 8
	fsMakeSock   = 1 << 9
	fsMakeFifo   = 1 << 10
	fsMakeBlock  = 1 << 11
	fsMakeSym    = 1 << 12
	fsRefer      = 1 << 13 // ABI 2
	fsTruncate   = 1 << 14 // ABI 3
	fsIoctlDev   = 1 << 15 // ABI 5

	fsABI1 = fsRefer - 1

	// fileRights are the rights that apply to a file (not a directory):
	// a rule on a file may grant only these.
	fileRights = fsExecute | fsWriteFile | fsReadFile | fsTruncate | fsIoctlDev
)

// Network access rights (LANDLOCK_ACCESS_NET_*, ABI 4): both are
// handled, so no TCP port may be bound and only the ports of a policy's
// Connect endpoints may be connected to.
const (
	netBindTCP    = 1 << 0
	netConnectTCP = 1 << 1
)

// Scopes (LANDLOCK_SCOPE_*, ABI 6).
const (
	scopeAbstractUnixSocket = 1 << 0
	scopeSignal             = 1 << 1
)

// ErrUnavailable reports a kernel without Landlock (or with it disabled).
var ErrUnavailable = errors.New("landlock is not available")

// ABI returns the Landlock ABI version the running kernel offers, or 0
// when it offers none.
func ABI() int {
	v, _, e := syscall.RawSyscall(sysCreateRuleset, 0, 0, createRulesetVersion)
	if e != 0 || int(v) < 1 {
		return 0
	}
	return int(v)
}

// Scoped reports whether a kernel at this ABI scopes signals and abstract
// UNIX sockets (ABI 6 and later).
func Scoped(abi int) bool { return abi >= MinABI }

// handledFS is every filesystem right the ABI knows.
func handledFS(abi int) uint64 {
	m := uint64(fsABI1)
	if abi >= 2 {
		m |= fsRefer
	}
	if abi >= 3 {
		m |= fsTruncate
	}
	if abi >= 5 {
		m |= fsIoctlDev
	}
	return m
}

// rights is what access grants, within the handled rights.
func (a Access) rights(handled uint64) uint64 {
	switch a {
	case ReadOnly:
		return (fsExecute | fsReadFile | fsReadDir) & handled
	case Device:
		return (fsReadFile | fsWriteFile | fsTruncate) & handled
	case ReadWrite:
		return handled &^ (fsMakeChar | fsMakeBlock)
	}
	return 0
}

// RestrictThread puts the calling OS thread into a new Landlock domain
// that allows exactly p (see the package documentation), sets
// no_new_privs on it and drops every capability it has (dropCapabilities). Both are per-thread and permanent: the caller must
// have locked the goroutine to its thread and must never unlock it (the
// thread then ends with the goroutine), and should start the one program
// meant to run inside from it. c, when not nil, keeps p.Shared prepared
// for the next call with the same Shared. It returns the ABI used, or an
// error carrying only an errno (ErrUnavailable without Landlock).
func RestrictThread(p *Policy, c *Cache) (int, error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	abi := ABI()
	if abi < 1 {
		return 0, ErrUnavailable
	}
	if abi < MinABIUnscoped {
		return abi, syscall.EOPNOTSUPP // TCP could not be restricted
	}
	if c == nil {
		c = &Cache{}
		defer c.Close()
	}
	prep, err := c.prepare(p.Shared)
	if err != nil {
		return abi, err
	}
	handled := handledFS(abi)
	var attr [24]byte // struct landlock_ruleset_attr
	binary.NativeEndian.PutUint64(attr[0:], handled)
	binary.NativeEndian.PutUint64(attr[8:], netBindTCP|netConnectTCP)
	size := 16
	if Scoped(abi) {
		binary.NativeEndian.PutUint64(attr[16:], scopeAbstractUnixSocket|scopeSignal)
		size = 24
	}
	rfd, _, e := syscall.RawSyscall(sysCreateRuleset, uintptr(unsafe.Pointer(&attr[0])), uintptr(size), 0)
	if e != 0 {
		return abi, e
	}
	defer syscall.Close(int(rfd))
	for _, o := range prep.opened {
		if err := addOpened(int(rfd), o, o.access.rights(handled)); err != nil {
			return abi, err
		}
	}
	for _, r := range p.Rules {
		if err := addRule(int(rfd), r, r.Access.rights(handled)); err != nil {
			return abi, err
		}
	}
	for _, port := range connectPorts(p.Connect) {
		var na [16]byte // struct landlock_net_port_attr
		binary.NativeEndian.PutUint64(na[0:], netConnectTCP)
		binary.NativeEndian.PutUint64(na[8:], uint64(port))
		if _, _, e := syscall.RawSyscall6(sysAddRule, rfd, ruleNetPort, uintptr(unsafe.Pointer(&na[0])), 0, 0, 0); e != 0 {
			return abi, e
		}
	}
	if p.Program != nil {
		if err := addOpened(int(rfd), opened{fd: p.Program.fd, access: ReadOnly}, ReadOnly.rights(handled)); err != nil {
			return abi, err
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return abi, e
	}
	// The small layer first: each restriction copies the thread's current
	// domain, so the large shared layer is copied once, not twice.
	if _, _, e := syscall.RawSyscall(sysRestrictSelf, rfd, 0, 0); e != 0 {
		return abi, e
	}
	if prep.layer >= 0 {
		if _, _, e := syscall.RawSyscall(sysRestrictSelf, uintptr(prep.layer), 0, 0); e != 0 {
			return abi, e
		}
	}
	// Landlock does not hold against every capability (CAP_SYS_PTRACE
	// passes its ptrace check: root's program read other processes'
	// environ), and many have nothing to do with files: none is left.
	return abi, dropCapabilities()
}

// readRights are what the Readable layer handles and grants.
const readRights = fsExecute | fsReadFile | fsReadDir

// Cache keeps one Shared prepared for the next RestrictThread with the
// same Shared: its rules' paths open (O_PATH) and its Readable layer built
// (a Landlock ruleset). Each start then only adds the opened paths to its
// own ruleset, and restricts itself with the kept layer. Its zero value is
// empty. It is not safe for concurrent use.
type Cache struct {
	key  string // the Shared prepared, "" when none
	prep prepared
}

// prepared is a Shared made ready: its paths (those that exist) opened,
// and its Readable layer (-1 when it has none).
type prepared struct {
	opened []opened
	layer  int
}

// opened is one rule's path, open, with what it grants.
type opened struct {
	fd     int
	access Access
	dir    bool
}

// prepare returns s prepared, preparing it when the cache holds another
// one (or none). A nil or empty Shared needs nothing.
func (c *Cache) prepare(s *Shared) (prepared, error) {
	if s == nil || len(s.rules)+len(s.readable) == 0 {
		return prepared{layer: -1}, nil
	}
	if c.key != "" && c.key == s.key {
		return c.prep, nil
	}
	c.Close()
	p := prepared{layer: -1}
	fail := func(err error) (prepared, error) {
		p.close()
		return prepared{}, err
	}
	for _, r := range s.rules {
		o, ok, err := open(r)
		if err != nil {
			return fail(err)
		}
		if ok {
			p.opened = append(p.opened, o)
		}
	}
	if len(s.readable) > 0 {
		var attr [8]byte
		binary.NativeEndian.PutUint64(attr[0:], readRights)
		rfd, _, e := syscall.RawSyscall(sysCreateRuleset, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)), 0)
		if e != 0 {
			return fail(e)
		}
		p.layer = int(rfd)
		for _, r := range s.readable {
			if err := addRule(p.layer, r, readRights); err != nil {
				return fail(err)
			}
		}
	}
	c.key, c.prep = s.key, p
	return p, nil
}

// Close releases what the cache keeps.
func (c *Cache) Close() {
	if c.key != "" {
		c.prep.close()
	}
	c.key, c.prep = "", prepared{}
}

func (p prepared) close() {
	for _, o := range p.opened {
		syscall.Close(o.fd)
	}
	if p.layer >= 0 {
		syscall.Close(p.layer)
	}
}

// open opens r's path (O_PATH, which follows a symbolic link: the rule
// then applies to its target). A missing optional path is not an error
// and gives false.
func open(r Rule) (opened, bool, error) {
	fd, err := syscall.Open(r.Path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		if r.Optional && (err == syscall.ENOENT || err == syscall.ENOTDIR) {
			return opened{}, false, nil
		}
		return opened{}, false, errnoOnly(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return opened{}, false, errnoOnly(err)
	}
	return opened{fd: fd, access: r.Access, dir: st.Mode&syscall.S_IFMT == syscall.S_IFDIR}, true, nil
}

// addRule adds one path-beneath rule granting allowed (within the handled
// rights) beneath r's path; a file gets only the rights that apply to
// files.
func addRule(rfd int, r Rule, allowed uint64) error {
	o, ok, err := open(r)
	if !ok {
		return err
	}
	defer syscall.Close(o.fd)
	return addOpened(rfd, o, allowed)
}

// addOpened adds one path-beneath rule for an opened path.
func addOpened(rfd int, o opened, allowed uint64) error {
	if !o.dir {
		allowed &= fileRights
	}
	if allowed == 0 {
		return nil
	}
	var attr [12]byte // struct landlock_path_beneath_attr (packed)
	binary.NativeEndian.PutUint64(attr[0:], allowed)
	binary.NativeEndian.PutUint32(attr[8:], uint32(int32(o.fd)))
	if _, _, e := syscall.RawSyscall6(sysAddRule, uintptr(rfd), rulePathBeneath, uintptr(unsafe.Pointer(&attr[0])), 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// errnoOnly keeps an error's errno, never a path.
func errnoOnly(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EINVAL
}

// OpenProgram opens the program at path (O_PATH, following symbolic
// links as execve does) for a start: it must be a regular file (EACCES
// otherwise, as execve answers for a directory). The caller gives it to
// Policy.Program, executes ExecPath and closes it once the program runs.
// The error carries only an errno.
func OpenProgram(path string) (*Program, error) {
	fd, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, errnoOnly(err)
	}
	return AdoptProgram(fd, path)
}

// AdoptProgram makes fd, a program's file that the caller opened (O_PATH
// is enough; see OpenBeneath), the program to start, as OpenProgram would
// have: it takes fd over (closed when it fails, else by Close) and path
// is only the program's name (a script's interpreter reads it; see
// ExecPath). The error carries only an errno.
func AdoptProgram(fd int, path string) (*Program, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		if err != nil {
			return nil, errnoOnly(err)
		}
		return nil, syscall.EACCES
	}
	if fd < 3 {
		// Descriptors 0 to 2 become the program's stdin, stdout and
		// stderr before the exec: its file would be gone by then.
		syscall.Close(fd)
		return nil, syscall.EBADF
	}
	pr := &Program{fd: fd, path: path}
	// A script is read by its interpreter through the name the kernel
	// passes it; /proc/self/fd/N would be closed by then (close-on-exec).
	// Only the first two bytes, through this same file; one that cannot
	// be read is no script its interpreter could read either.
	if r, err := syscall.Open(procFD(fd), syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOCTTY|syscall.O_NONBLOCK, 0); err == nil {
		var b [2]byte
		n, _ := syscall.Pread(r, b[:], 0)
		pr.script = n == 2 && b == [2]byte{'#', '!'}
		syscall.Close(r)
	}
	return pr, nil
}

// ExecPath is the name to execute the program by: /proc/self/fd/N (its
// opened file itself) for a binary; for a script the path it was opened
// by, which the interpreter then reads (under the domain: the name can
// lead it only to what the domain lets it read, and the rule stays on the
// opened file), so that the script's $0 is its own name.
func (pr *Program) ExecPath() string {
	if pr.script {
		return pr.path
	}
	return procFD(pr.fd)
}

// Close closes the program's file.
func (pr *Program) Close() {
	if pr.fd >= 0 {
		syscall.Close(pr.fd)
		pr.fd = -1
	}
}

// ErrOutside: the name given to OpenBeneath leads out of its directory
// (a symbolic link to an absolute path or above the directory, "..")
// or through a magic link (/proc/self/root, /proc/<pid>/fd/N).
var ErrOutside = errors.New("the name leads out of its directory")

// OpenBeneath opens name (relative) beneath dir for a start (O_PATH),
// resolved by the kernel (openat2 RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS):
// a symbolic link is followed only while it stays beneath dir, anything
// else fails with ErrOutside; other errors carry only an errno. The file
// is what AdoptProgram takes, so that a name the program's own side
// shapes (a check's program in the workspace) can neither place the
// domain's rule for the program nor lead the exec outside dir.
func OpenBeneath(dir *os.File, name string) (*os.File, error) {
	if name == "" || strings.HasPrefix(name, "/") {
		return nil, ErrOutside
	}
	for range 16 {
		fd, e := openat2(int(dir.Fd()), name, oPath|syscall.O_CLOEXEC, resolveBeneath|resolveNoMagicLink)
		switch e {
		case 0:
			return os.NewFile(uintptr(fd), name), nil
		case syscall.EINTR, syscall.EAGAIN: // EAGAIN: a rename meanwhile, the kernel asks for a retry
			continue
		case syscall.EXDEV, syscall.ELOOP:
			return nil, ErrOutside
		}
		return nil, e
	}
	return nil, syscall.EAGAIN
}

func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// ProtectSelf makes the calling process non-dumpable: processes of the
// same account can no longer read its /proc/<pid>/environ, mem or fd
// entries, nor ptrace it, and it leaves no core dump. Call it before
// reading any secret. It applies to the whole process and is reset only by
// an exec.
func ProtectSelf() error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetDumpable, 0, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
