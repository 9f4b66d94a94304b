package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// Host is the machine an installation lives on.
type Host interface {
	FS() FS
	Accounts() Accounts
	Services() Services
	Now() time.Time
}

// FS is the filesystem seen through the host's root. Every name is an
// absolute host path ("/opt/agent-forge"). Writes never replace anything:
// WriteFile creates a new file and Rename refuses an existing target.
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	// ReadFile reads a regular file that is not a symlink, at most max bytes.
	ReadFile(name string, max int64) ([]byte, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	Mkdir(name string, perm fs.FileMode) error
	// MkdirTemp creates a new private (0700) directory in dir.
	MkdirTemp(dir, pattern string) (string, error)
	// WriteFile creates name (which must not exist) with data and perm,
	// and syncs it.
	WriteFile(name string, data []byte, perm fs.FileMode) error
	Lchown(name string, uid, gid int) error
	Chmod(name string, perm fs.FileMode) error
	// Rename is renameat2(RENAME_NOREPLACE).
	Rename(from, to string) error
	RemoveAll(name string) error
	// Lock opens (creating when absent, mode 0600) the lock file name and
	// takes an exclusive non-blocking flock. The returned release closes it.
	Lock(name string) (release func(), created bool, err error)
	// Run executes the program at name with args and returns its stdout
	// (at most 4 KiB) within a short timeout.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
	// Exchange is Run with input on the program's stdin (then closed):
	// stdout (at most 4 KiB) is returned whatever the exit status, and
	// the error is the run's.
	Exchange(ctx context.Context, name string, input []byte, args ...string) ([]byte, error)
	// Real returns the path name has on the running system.
	Real(name string) string
}

// Accounts manages the dedicated system accounts.
type Accounts interface {
	// Lookup returns the account, found=false when absent.
	Lookup(name string) (a AccountInfo, found bool, err error)
	CreateSystem(name string) error
	Remove(name string) error
}

// AccountInfo is what the installer needs to know of an account: its ids,
// the name of its primary group and the other accounts in that group.
type AccountInfo struct {
	UID, GID int
	Group    string
	Members  []string
}

// Services is the service manager (systemd).
type Services interface {
	DaemonReload(ctx context.Context) error
	Enable(ctx context.Context, unit string) error
	Disable(ctx context.Context, unit string) error
	Start(ctx context.Context, unit string) error
	Stop(ctx context.Context, unit string) error
	IsActive(ctx context.Context, unit string) (bool, error)
	IsEnabled(ctx context.Context, unit string) (bool, error)
	// MainPID is the unit's main process (0 when it has none).
	MainPID(ctx context.Context, unit string) (int, error)
	// MainExe is the executable path of the unit's main process ("" when
	// it has none; a replaced file reads "<path> (deleted)").
	MainExe(ctx context.Context, unit string) (string, error)
	// DropIns lists the unit's drop-in files.
	DropIns(ctx context.Context, unit string) ([]string, error)
	// MainCgroup is the cgroup v2 path of the unit's main process ("" when
	// it has none).
	MainCgroup(ctx context.Context, unit string) (string, error)
}

// SystemHost is the real machine: root "/", useradd/userdel and systemctl.
func SystemHost() Host { return systemHost{fs: osFS{root: "/"}} }

type systemHost struct{ fs osFS }

func (h systemHost) FS() FS             { return h.fs }
func (h systemHost) Accounts() Accounts { return systemAccounts{} }
func (h systemHost) Services() Services { return systemctl{} }
func (h systemHost) Now() time.Time     { return time.Now() }

// osFS maps host paths under root. Production uses "/".
type osFS struct{ root string }

func (f osFS) p(name string) string {
	if f.root == "/" {
		return name
	}
	return filepath.Join(f.root, name)
}

func (f osFS) Real(name string) string { return f.p(name) }

func (f osFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(f.p(name)) }

func (f osFS) ReadFile(name string, max int64) ([]byte, error) {
	fd, err := os.OpenFile(f.p(name), openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(fd, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errors.New("file too large")
	}
	return b, nil
}

func (f osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(f.p(name)) }

func (f osFS) Mkdir(name string, perm fs.FileMode) error {
	if err := os.Mkdir(f.p(name), perm); err != nil {
		return err
	}
	return os.Chmod(f.p(name), perm)
}

func (f osFS) MkdirTemp(dir, pattern string) (string, error) {
	d, err := os.MkdirTemp(f.p(dir), pattern)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(d)), nil
}

func (f osFS) WriteFile(name string, data []byte, perm fs.FileMode) error {
	fd, err := os.OpenFile(f.p(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return err
	}
	_, werr := fd.Write(data)
	if werr == nil {
		werr = fd.Chmod(perm)
	}
	if werr == nil {
		werr = fd.Sync()
	}
	if cerr := fd.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

func (f osFS) Lchown(name string, uid, gid int) error { return os.Lchown(f.p(name), uid, gid) }
func (f osFS) Chmod(name string, perm fs.FileMode) error {
	return os.Chmod(f.p(name), perm)
}
func (f osFS) Rename(from, to string) error { return renameNoReplace(f.p(from), f.p(to)) }
func (f osFS) RemoveAll(name string) error  { return os.RemoveAll(f.p(name)) }

func (f osFS) Lock(name string) (func(), bool, error) {
	created := false
	fd, err := os.OpenFile(f.p(name), os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err == nil {
		created = true
	} else if errors.Is(err, fs.ErrExist) {
		fd, err = os.OpenFile(f.p(name), os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, false, err
	}
	fi, err := fd.Stat()
	if err == nil && (!fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || !ownedBy(fi, 0, -1)) {
		err = errors.New("lock file is not a root-owned 0600 regular file")
	}
	if err == nil {
		err = syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		fd.Close()
		if created {
			os.Remove(f.p(name))
		}
		return nil, false, err
	}
	return func() { fd.Close() }, created, nil
}

func (f osFS) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return f.run(ctx, name, nil, args)
}

func (f osFS) Exchange(ctx context.Context, name string, input []byte, args ...string) ([]byte, error) {
	return f.run(ctx, name, input, args)
}

// run executes name with a fixed environment; input (nil: none) is its
// stdin.
func (f osFS) run(ctx context.Context, name string, input []byte, args []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.p(name), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	// A process left holding the output open does not keep the run waiting:
	// once the program has exited (or been killed) the output is closed
	// after a short delay and the run fails.
	cmd.WaitDelay = time.Second
	var out limitedBuffer
	out.max = 4096
	cmd.Stdout = &out
	if input != nil {
		cmd.Stdin = bytes.NewReader(input)
	}
	err := cmd.Run()
	return out.b.Bytes(), err
}

type limitedBuffer struct {
	b   bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		if len(p) > room {
			l.b.Write(p[:room])
		} else {
			l.b.Write(p)
		}
	}
	return len(p), nil
}

// ownedBy reports whether fi is owned by uid and (gid >= 0) gid.
func ownedBy(fi fs.FileInfo, uid, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return int(st.Uid) == uid && (gid < 0 || int(st.Gid) == gid)
}

// owner returns fi's uid and gid.
func owner(fi fs.FileInfo) (int, int) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1
	}
	return int(st.Uid), int(st.Gid)
}

// Owner is exported for forge doctor.
func Owner(fi fs.FileInfo) (uid, gid int) { return owner(fi) }

// System tools run by absolute path with a fixed environment, like the
// release's own binaries: nothing of the caller's PATH, locale or
// SYSTEMD_* variables reaches them.
const (
	toolUseradd   = "/usr/sbin/useradd"
	toolUserdel   = "/usr/sbin/userdel"
	toolSystemctl = "/usr/bin/systemctl"
)

var toolEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"}

type systemAccounts struct{}

func (systemAccounts) Lookup(name string) (AccountInfo, bool, error) {
	var a AccountInfo
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return a, false, nil
	}
	if err != nil {
		return a, false, errors.New("account database cannot be read")
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return a, false, errors.New("account has a non-numeric id")
	}
	a.UID, a.GID = uid, gid
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		return a, false, errors.New("the account's primary group cannot be read")
	}
	a.Group = g.Name
	a.Members, err = groupMembers(g.Name)
	if err != nil {
		return a, false, err
	}
	return a, true, nil
}

// groupMembers reads the group's supplementary members from /etc/group.
func groupMembers(group string) ([]string, error) {
	b, err := osFS{root: "/"}.ReadFile("/etc/group", 4<<20)
	if err != nil {
		return nil, errors.New("/etc/group cannot be read")
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 4 && f[0] == group {
			var m []string
			for _, n := range strings.Split(f[3], ",") {
				if n != "" {
					m = append(m, n)
				}
			}
			return m, nil
		}
	}
	return nil, nil
}

func (systemAccounts) CreateSystem(name string) error {
	return runTool(context.Background(), toolUseradd, "--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name)
}

func (systemAccounts) Remove(name string) error {
	return runTool(context.Background(), toolUserdel, name)
}

type systemctl struct{}

func (systemctl) DaemonReload(ctx context.Context) error {
	return runTool(ctx, toolSystemctl, "daemon-reload")
}
func (systemctl) Enable(ctx context.Context, unit string) error {
	return runTool(ctx, toolSystemctl, "enable", "--quiet", unit)
}
func (systemctl) Disable(ctx context.Context, unit string) error {
	return runTool(ctx, toolSystemctl, "disable", "--quiet", unit)
}
func (systemctl) Start(ctx context.Context, unit string) error {
	return runTool(ctx, toolSystemctl, "start", unit)
}
func (systemctl) Stop(ctx context.Context, unit string) error {
	return runTool(ctx, toolSystemctl, "stop", unit)
}
func (systemctl) IsActive(ctx context.Context, unit string) (bool, error) {
	return query(ctx, "is-active", unit, "active")
}
func (systemctl) IsEnabled(ctx context.Context, unit string) (bool, error) {
	return query(ctx, "is-enabled", unit, "enabled")
}

func (systemctl) MainPID(ctx context.Context, unit string) (int, error) {
	out, err := show(ctx, unit, "MainPID")
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(out)
	if err != nil || pid < 0 {
		return 0, errors.New("systemctl show MainPID gave no number")
	}
	return pid, nil
}

func (s systemctl) MainExe(ctx context.Context, unit string) (string, error) {
	pid, err := s.MainPID(ctx, unit)
	if err != nil || pid == 0 {
		return "", err
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return "", errors.New("the unit's main process cannot be inspected")
	}
	return exe, nil
}

func (s systemctl) MainCgroup(ctx context.Context, unit string) (string, error) {
	pid, err := s.MainPID(ctx, unit)
	if err != nil || pid == 0 {
		return "", err
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", errors.New("the unit's main process cannot be inspected")
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", errors.New("the unit's main process cannot be inspected")
	}
	cg, err := supervise.CgroupV2Path(b)
	if err != nil {
		return "", errors.New("the unit's main process has no cgroup v2")
	}
	return cg, nil
}

func (systemctl) DropIns(ctx context.Context, unit string) ([]string, error) {
	out, err := show(ctx, unit, "DropInPaths")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// show returns one unit property's value.
func show(ctx context.Context, unit, property string) (string, error) {
	out, err := capture(ctx, 4096, toolSystemctl, "show", "--property", property, "--value", unit)
	if err != nil {
		return "", fmt.Errorf("systemctl show %s failed", property)
	}
	return strings.TrimSpace(out), nil
}

// query runs `systemctl VERB UNIT` and compares its one-word answer; a
// non-zero exit with an answer is "no", no answer at all is an error.
func query(ctx context.Context, verb, unit, yes string) (bool, error) {
	out, err := capture(ctx, 256, toolSystemctl, verb, unit)
	answer := strings.TrimSpace(out)
	if answer == "" {
		if err != nil {
			return false, fmt.Errorf("systemctl %s failed", verb)
		}
		return false, fmt.Errorf("systemctl %s gave no answer", verb)
	}
	return answer == yes, nil
}

// capture runs a system tool and returns at most max bytes of its stdout.
func capture(ctx context.Context, max int, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Dir = toolEnv, "/"
	var out limitedBuffer
	out.max = max
	cmd.Stdout = &out
	err := cmd.Run()
	return out.b.String(), err
}

// runTool runs a system tool with a bounded time; its output is discarded
// so nothing it prints reaches forge's output.
func runTool(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Dir = toolEnv, "/"
	if err := cmd.Run(); err != nil {
		verb := filepath.Base(name)
		if len(args) > 0 {
			verb += " " + args[0]
		}
		return fmt.Errorf("%s failed", verb)
	}
	return nil
}
