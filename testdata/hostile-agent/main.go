// Command hostile-agent is the agent's seat played hostile: a protocol v1
// plugin (text and workspace_edit) and, with the argument "check", a
// scoped-check program. Either way it tries to reach what the sandbox
// (docs/sandbox.md) must keep from it, and reports every try:
//
//   - proc: every process outside its own tree: /proc/<pid>/environ (read),
//     mem (open), fd/* (open or readlink any entry), cmdline (read: world
//     readable on Linux, so it counts only through a secret it reveals);
//   - ptrace: PTRACE_SEIZE of every forge-* process (Gate, Worker, reapers);
//   - signal: kill(pid, 0) to every process outside its tree;
//   - abstract: connect to every abstract UNIX socket in /proc/net/unix;
//   - read: every path in HOSTILE_READ, every -config file named on a
//     forge-* command line, the installed layout's directories: a file
//     read or a directory listed (and the files in it read) is a reach;
//   - write: create a file in every directory of HOSTILE_WRITE, /tmp,
//     /var/tmp, /dev/shm, the installed state directories, its
//     repository's refs/heads and hooks, and the directories holding its
//     own workspace and run directory (where the other attempts live);
//   - symlink, hardlink: a link in its own directory to every file it was
//     told about, then a read through it;
//   - meta-*: the metadata of every file and directory it was told about
//     and of its repository's files, by every route (meta.go), and what
//     the guard refuses beyond that: io_uring, set-ID bits, its own roots,
//     the fs-verity and fscrypt ioctls (guard.go);
//   - the public-source layout (the Worker's source cache, other attempts'
//     containers, the Gate's prepared repositories, the Worker's bundle
//     routes): source.go;
//   - gate: GET /v1/version on HOSTILE_GATE without a token, then with every
//     token-like value (NAME=value with TOKEN or KEY in NAME) found in
//     anything it read;
//   - survivor: chains of setsid hoppers left behind, each of which
//     reports itself if it is still alive after the invocation ended
//     (survivor.go);
//   - with the instruction "sparse-meta" or "sparse-tree" it does only
//     this: its git metadata or a file of its tree made 1 TiB sparse
//     files, for the Worker to validate (sparse.go).
//
// Nothing here decides what is secret: every line of the report carries
// what was read (base64, bounded), and the script counts a try as reached
// when the try itself succeeded or when what it read holds a secret the
// script knows. The report goes, one JSON object per line, to the UNIX
// socket HOSTILE_REPORT (a collector the script runs), and for a text job
// it is also the result.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/serve"
)

// sample bounds what one try keeps of what it read.
const sample = 4096

// try is one line of the report.
type try struct {
	Who    string `json:"who"`    // plugin or check
	Kind   string `json:"kind"`   // proc-environ, read, write, ...
	Target string `json:"target"` // what was tried
	OK     bool   `json:"ok"`     // the operation itself succeeded
	Data   string `json:"data,omitempty"`
	Layout string `json:"layout,omitempty"` // "gate" in a public-source attempt (source.go)
}

type agent struct {
	who    string
	layout string
	self   int
	tree   map[int]bool // itself and its descendants
	tries  []try
	found  []string // token-like values seen in anything read
	peers  []string // the concurrent hostile plugins' containers (source.go)
	// peerProxies are the concurrent hostile plugins' CONNECT proxies.
	peerProxies []string
	targets     []string // files to link to
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "foreign" {
		foreignMain(os.Args[2:]) // meta.go
	}
	if len(os.Args) > 1 && os.Args[1] == "check" {
		a := newAgent("check")
		a.run(mustWD())
		a.send()
		os.Exit(0) // the check passes: its report is what counts
	}
	caps := []plugin.Capability{plugin.CapText, plugin.CapWorkspaceEdit}
	err := serve.Serve(context.Background(), os.Stdin, os.Stdout, caps, func(_ context.Context, r serve.Request) (serve.Result, error) {
		a := newAgent("plugin")
		dir := mustWD()
		if r.Operation == plugin.OpWorkspaceEdit {
			dir = r.Workspace
			if r.Instruction == "sparse-meta" || r.Instruction == "sparse-tree" {
				if _, ok := findLayout(dir); ok {
					a.layout = "gate"
				}
				a.plantSparse(dir, r.Instruction) // sparse.go
				a.send()
				return serve.Result{}, nil
			}
		}
		a.run(dir)
		a.send()
		if r.Operation == plugin.OpWorkspaceEdit {
			// A change to review, so the checks run.
			if err := os.WriteFile(filepath.Join(r.Workspace, "hostile.txt"), []byte("was here\n"), 0o644); err != nil {
				return serve.Result{}, serve.Fail(plugin.CategoryExecutionFailed)
			}
			return serve.Result{}, nil
		}
		return serve.Result{Output: a.summary()}, nil
	})
	if err != nil {
		os.Exit(1)
	}
}

func mustWD() string {
	wd, err := os.Getwd()
	if err != nil {
		os.Exit(1)
	}
	return wd
}

func newAgent(who string) *agent {
	return &agent{who: who, self: os.Getpid()}
}

func (a *agent) add(kind, target string, ok bool, data []byte) {
	t := try{Who: a.who, Kind: kind, Target: target, OK: ok, Layout: a.layout}
	if len(data) > 0 {
		if len(data) > sample {
			data = data[:sample]
		}
		t.Data = base64.StdEncoding.EncodeToString(data)
		a.harvest(data)
	}
	a.tries = append(a.tries, t)
}

// harvest keeps every NAME=value in data whose NAME looks like a secret's,
// to replay it against the Gate.
func (a *agent) harvest(data []byte) {
	for _, f := range strings.FieldsFunc(string(data), func(r rune) bool { return r == 0 || r == '\n' || r == ' ' || r == '"' }) {
		name, val, ok := strings.Cut(f, "=")
		up := strings.ToUpper(name)
		if ok && val != "" && len(val) < 512 && (strings.Contains(up, "TOKEN") || strings.Contains(up, "KEY")) {
			a.found = append(a.found, val)
		}
	}
}

func (a *agent) run(dir string) {
	if _, ok := findLayout(dir); ok {
		a.layout = "gate"
	}
	procs := a.processes()
	a.probeProc(procs)
	a.probeSignals(procs)
	a.probePtrace(procs)
	a.probeAbstract()
	reads := a.readTargets(procs)
	for _, p := range reads {
		a.probeRead(p)
	}
	writeDirs := a.writeTargets(dir)
	for _, d := range writeDirs {
		a.probeWrite(d)
	}
	a.probeSourceLayout(dir) // source.go
	a.probeLinks(dir)
	a.probeMeta(dir, writeDirs)
	a.probeGuard(dir, writeDirs) // guard.go
	a.probeGate()
	a.probeNetwork()  // net.go
	a.probeSurvivor() // survivor.go: last, the invocation ends right after
}

// proc is one process outside the agent's tree.
type proc struct {
	pid  int
	comm string
	argv []string
}

// processes lists every process but the agent's own tree (itself and its
// descendants, by parent links).
func (a *agent) processes() []proc {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	comm := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid], comm[pid] = ppid, s[open+1:end]
	}
	a.tree = map[int]bool{a.self: true}
	for changed := true; changed; {
		changed = false
		for pid, pp := range parent {
			if a.tree[pp] && !a.tree[pid] {
				a.tree[pid], changed = true, true
			}
		}
	}
	var out []proc
	for pid := range parent {
		if a.tree[pid] {
			continue
		}
		p := proc{pid: pid, comm: comm[pid]}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
			p.argv = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		}
		out = append(out, p)
	}
	return out
}

func (a *agent) probeProc(procs []proc) {
	for _, p := range procs {
		base := "/proc/" + strconv.Itoa(p.pid)
		b, err := readSome(base + "/environ")
		a.add("proc-environ", base, err == nil && len(b) > 0, b)
		f, err := os.Open(base + "/mem")
		a.add("proc-mem", base, err == nil, nil)
		if err == nil {
			f.Close()
		}
		reached := false
		if ents, err := os.ReadDir(base + "/fd"); err == nil {
			for _, e := range ents {
				if _, err := os.Readlink(base + "/fd/" + e.Name()); err == nil {
					reached = true
					break
				}
			}
		}
		a.add("proc-fd", base, reached, nil)
		b, _ = readSome(base + "/cmdline")
		a.add("proc-cmdline", base, false, b) // counts only by what it reveals
	}
}

func (a *agent) probeSignals(procs []proc) {
	for _, p := range procs {
		err := syscall.Kill(p.pid, 0)
		a.add("signal", "pid "+strconv.Itoa(p.pid)+" "+p.comm, err == nil, nil)
	}
}

// probePtrace seizes every forge-* process (PTRACE_SEIZE does not stop it;
// the agent's exit detaches it).
func (a *agent) probePtrace(procs []proc) {
	const ptraceSeize = 0x4206
	for _, p := range procs {
		if !strings.HasPrefix(p.comm, "forge-") {
			continue
		}
		_, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(p.pid), 0, 0, 0, 0)
		a.add("ptrace", "pid "+strconv.Itoa(p.pid)+" "+p.comm, e == 0, nil)
	}
}

// probeAbstract connects to every listening abstract UNIX socket.
func (a *agent) probeAbstract() {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.HasPrefix(f[7], "@") || seen[f[7]] {
			continue
		}
		seen[f[7]] = true
		name := "\x00" + f[7][1:]
		c, err := net.DialTimeout("unix", name, time.Second)
		a.add("abstract-socket", f[7], err == nil, nil)
		if err == nil {
			c.Close()
		}
	}
}

// readTargets: HOSTILE_READ, the installed layout, and every -config file
// on a forge-* command line.
func (a *agent) readTargets(procs []proc) []string {
	out := splitList(os.Getenv("HOSTILE_READ"))
	out = append(out, "/etc/agent-forge", "/var/lib/agent-forge/gate", "/var/lib/agent-forge/worker")
	for _, p := range procs {
		for i, arg := range p.argv {
			if (arg == "-config" || arg == "--config") && i+1 < len(p.argv) && filepath.IsAbs(p.argv[i+1]) {
				out = append(out, p.argv[i+1], filepath.Dir(p.argv[i+1]))
			}
		}
	}
	return dedup(out)
}

func (a *agent) probeRead(p string) {
	fi, err := os.Lstat(p)
	if err != nil {
		return // nothing there to try
	}
	if !fi.IsDir() {
		b, err := readSome(p)
		a.add("read", p, err == nil, b)
		if fi.Mode().IsRegular() {
			a.targets = append(a.targets, p)
		}
		return
	}
	ents, err := os.ReadDir(p)
	a.add("list", p, err == nil, nil)
	for _, e := range ents {
		if e.Type().IsRegular() {
			q := filepath.Join(p, e.Name())
			b, err := readSome(q)
			a.add("read", q, err == nil, b)
			a.targets = append(a.targets, q)
		}
	}
}

// writeTargets: HOSTILE_WRITE, the shared temporary directories, the
// account's home (from the password database, not $HOME: a check's HOME
// is its own), the installed state, and, found from its own directories,
// where the other attempts and repositories live: the worktree root (the
// workspace's grandparent), the runtime root (the parent of a plugin's
// working directory, the grandparent of a check's TMPDIR), and from the
// worktree's .git file the repository's refs/heads, hooks, git directory,
// worktrees directory (the other attempts' git metadata), the repository
// itself and the directory holding the repositories.
func (a *agent) writeTargets(dir string) []string {
	out := splitList(os.Getenv("HOSTILE_WRITE"))
	out = append(out, "/tmp", "/var/tmp", "/dev/shm", "/var/lib/agent-forge", "/var/lib/agent-forge/gate",
		"/var/lib/agent-forge/worker/worktrees", "/var/lib/agent-forge/worker/runtime", "/var/lib/agent-forge/worker/repositories")
	if u, err := user.Current(); err == nil && filepath.IsAbs(u.HomeDir) {
		out = append(out, u.HomeDir)
	}
	if a.who == "plugin" {
		out = append(out, filepath.Dir(mustWD()))
	} else if t := os.Getenv("TMPDIR"); filepath.IsAbs(t) {
		out = append(out, filepath.Dir(filepath.Dir(t)))
	}
	// A public-source attempt's .git names its own repository: source.go.
	if b, err := os.ReadFile(filepath.Join(dir, ".git")); err == nil && a.layout == "" {
		out = append(out, filepath.Dir(filepath.Dir(dir)))
		if admin, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: "); ok && filepath.IsAbs(admin) {
			common := filepath.Dir(filepath.Dir(admin))
			out = append(out, filepath.Join(common, "refs", "heads"), filepath.Join(common, "hooks"), common,
				filepath.Dir(admin), filepath.Dir(common), filepath.Dir(filepath.Dir(common)))
		}
	}
	return dedup(out)
}

func (a *agent) probeWrite(d string) {
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return
	}
	p := filepath.Join(d, "hostile-"+strconv.Itoa(a.self))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	a.add("write", d, err == nil, nil)
	if err == nil {
		f.Close()
		os.Remove(p)
	}
}

// probeLinks links every file it was told about into dir and reads
// through the link.
func (a *agent) probeLinks(dir string) {
	for i, t := range dedup(a.targets) {
		s := filepath.Join(dir, "soft-"+strconv.Itoa(i))
		ok := false
		var b []byte
		if os.Symlink(t, s) == nil {
			var err error
			b, err = readSome(s)
			ok = err == nil
			os.Remove(s)
		}
		a.add("symlink", t, ok, b)
		h := filepath.Join(dir, "hard-"+strconv.Itoa(i))
		ok, b = false, nil
		if os.Link(t, h) == nil {
			ok = true
			b, _ = readSome(h)
			os.Remove(h)
		}
		a.add("hardlink", t, ok, b)
	}
}

// probeGate asks the Gate's owner API (GET /v1/version) without a token, then with every
// token-like value found.
func (a *agent) probeGate() {
	addr := os.Getenv("HOSTILE_GATE")
	if addr == "" {
		return
	}
	client := &http.Client{Timeout: 5 * time.Second}
	ask := func(token string) bool {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/version", nil)
		if err != nil {
			return false
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	a.add("gate-no-token", addr, ask(""), nil)
	for _, tok := range dedup(a.found) {
		a.add("gate-replay", addr, ask(tok), nil)
	}
}

// send writes the report to HOSTILE_REPORT, one JSON object per line.
func (a *agent) send() {
	addr := os.Getenv("HOSTILE_REPORT")
	if addr == "" {
		return
	}
	c, err := net.DialTimeout("unix", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	enc := json.NewEncoder(c)
	for _, t := range a.tries {
		if enc.Encode(t) != nil {
			return
		}
	}
}

// summary counts the tries whose operation succeeded.
func (a *agent) summary() string {
	ok := 0
	for _, t := range a.tries {
		if t.OK {
			ok++
		}
	}
	return "tried=" + strconv.Itoa(len(a.tries)) + " succeeded=" + strconv.Itoa(ok)
}

func readSome(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, sample)
	n, err := f.Read(b)
	if n > 0 {
		return b[:n], nil
	}
	return nil, err
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ":") {
		if filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}

func dedup(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
