package install

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// faults makes the k-th mutating host call fail (k = 0: never).
type faults struct {
	mu    sync.Mutex
	n, at int
	hit   string
	// beforeRename, when set, runs before every rename (to race one).
	beforeRename func(to string)
	// beforeLock, when set, runs before the installer lock is taken (to
	// finish another installer's run first).
	beforeLock func()
}

func (f *faults) call(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.n == f.at {
		f.hit = op
		return errors.New("injected failure")
	}
	return nil
}

type faultFS struct {
	osFS
	f *faults
}

func (x faultFS) Mkdir(n string, p fs.FileMode) error {
	if err := x.f.call("mkdir " + n); err != nil {
		return err
	}
	return x.osFS.Mkdir(n, p)
}
func (x faultFS) MkdirTemp(d, p string) (string, error) {
	if err := x.f.call("mkdirtemp " + d); err != nil {
		return "", err
	}
	return x.osFS.MkdirTemp(d, p)
}
func (x faultFS) WriteFile(n string, b []byte, p fs.FileMode) error {
	if err := x.f.call("write " + n); err != nil {
		return err
	}
	return x.osFS.WriteFile(n, b, p)
}
func (x faultFS) Lchown(n string, u, g int) error {
	if err := x.f.call("chown " + n); err != nil {
		return err
	}
	return x.osFS.Lchown(n, u, g)
}
func (x faultFS) Chmod(n string, p fs.FileMode) error {
	if err := x.f.call("chmod " + n); err != nil {
		return err
	}
	return x.osFS.Chmod(n, p)
}
func (x faultFS) Rename(a, b string) error {
	if err := x.f.call("rename " + a + " " + b); err != nil {
		return err
	}
	if x.f.beforeRename != nil {
		x.f.beforeRename(b)
	}
	return x.osFS.Rename(a, b)
}
func (x faultFS) RemoveAll(n string) error {
	if err := x.f.call("remove " + n); err != nil {
		return err
	}
	return x.osFS.RemoveAll(n)
}
func (x faultFS) Lock(n string) (func(), bool, error) {
	if err := x.f.call("lock " + n); err != nil {
		return nil, false, err
	}
	if x.f.beforeLock != nil {
		x.f.beforeLock()
	}
	return x.osFS.Lock(n)
}

type fakeAccounts struct {
	mu    sync.Mutex
	users map[string]AccountInfo
	f     *faults
}

func (a *fakeAccounts) Lookup(name string) (AccountInfo, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.users[name]
	return u, ok, nil
}

// fakeIDs are the ids useradd --system --user-group gives each account.
var fakeIDs = map[string]int{GateAccount: 990, WorkerAccount: 991}

func (a *fakeAccounts) CreateSystem(name string) error {
	if err := a.f.call("useradd " + name); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users[name] = AccountInfo{UID: fakeIDs[name], GID: fakeIDs[name], Group: name}
	return nil
}
func (a *fakeAccounts) Remove(name string) error {
	if err := a.f.call("userdel " + name); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.users, name)
	return nil
}

// fakeServices plays systemd and, behind the layout's listener, the
// started Gate: it answers as the release whose forge-gate is installed
// when the unit started, with the owner token of the installed gate.env.
type fakeServices struct {
	mu       sync.Mutex
	f        *faults
	root     string
	enabled  map[string]bool
	active   map[string]bool
	serving  string // "version commit" of the running Gate
	schema   int    // the schema version it reports (its receipt's)
	token    string
	reloads  int
	loaded   map[string]uint64 // unit files systemd loaded (nil: never reloaded)
	badReady map[string]bool   // Gate versions that never become ready
	// impostor, when set, is the MainPID systemd reports for the Gate (a
	// process that does not hold the listener's sockets).
	impostor int
	// onStart, when set, runs after a unit has started.
	onStart func(unit string)
	// authSeen counts requests carrying an Authorization header that
	// reached the listener while an impostor was the Gate's MainPID.
	authSeen int
	dropIns  map[string][]string
	exe      map[string]string // MainExe overrides
	cgroup   map[string]string // MainCgroup overrides
	// failActive units fail their start while staying active.
	failActive map[string]bool
}

// interrupted is what systemctl run under a cancelled context does.
func interrupted(ctx context.Context) error {
	if ctx.Err() != nil {
		return errors.New("systemctl killed: " + ctx.Err().Error())
	}
	return nil
}

func (s *fakeServices) MainPID(ctx context.Context, u string) (int, error) {
	if err := interrupted(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active[u] {
		return 0, nil
	}
	if u == GateUnit && s.impostor != 0 {
		return s.impostor, nil
	}
	// The fake Gate is this test process's listener.
	return os.Getpid(), nil
}

// MainCgroup: an active unit's main process is where the Worker moves
// itself once its delegated cgroup works, unless overridden.
func (s *fakeServices) MainCgroup(ctx context.Context, u string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active[u] {
		return "", nil
	}
	if c, ok := s.cgroup[u]; ok {
		return c, nil
	}
	return "/system.slice/" + u + "/supervisor", nil
}

func (s *fakeServices) MainExe(ctx context.Context, u string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active[u] {
		return "", nil
	}
	if e, ok := s.exe[u]; ok {
		return e, nil
	}
	if u == GateUnit {
		return BinDir + "/forge-gate", nil
	}
	return BinDir + "/forge-worker", nil
}

func (s *fakeServices) DropIns(ctx context.Context, u string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropIns[u], nil
}

func (s *fakeServices) DaemonReload(ctx context.Context) error {
	if err := interrupted(ctx); err != nil {
		return err
	}
	if err := s.f.call("daemon-reload"); err != nil {
		return err
	}
	s.mu.Lock()
	s.reloads++
	s.loaded = map[string]uint64{}
	for _, u := range []string{GateUnit, WorkerUnit} {
		s.loaded[u] = s.unitFile(u)
	}
	s.mu.Unlock()
	return nil
}

// unitFile identifies the unit file on disk (its inode; 0 when absent),
// which is what systemd has loaded after a daemon-reload.
func (s *fakeServices) unitFile(u string) uint64 {
	fi, err := os.Lstat(filepath.Join(s.root, UnitPath(u)))
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// stale lists the units whose file on disk is not the one systemd loaded
// (a unit file changed without a daemon-reload).
func (s *fakeServices) stale() []string {
	var out []string
	for _, u := range []string{GateUnit, WorkerUnit} {
		if s.loaded != nil && s.loaded[u] != s.unitFile(u) {
			out = append(out, u)
		}
	}
	return out
}
func (s *fakeServices) Enable(ctx context.Context, u string) error {
	if err := interrupted(ctx); err != nil {
		return err
	}
	if err := s.f.call("enable " + u); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(filepath.Join(s.root, UnitPath(u))); err != nil {
		return errors.New("no such unit")
	}
	s.enabled[u] = true
	return nil
}
func (s *fakeServices) Disable(ctx context.Context, u string) error {
	if err := interrupted(ctx); err != nil {
		return err
	}
	if err := s.f.call("disable " + u); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.enabled, u)
	return nil
}
func (s *fakeServices) Start(ctx context.Context, u string) error {
	if err := interrupted(ctx); err != nil {
		return err
	}
	if err := s.f.call("start " + u); err != nil {
		return err
	}
	if err := s.start(u); err != nil {
		return err
	}
	if s.onStart != nil {
		s.onStart(u)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failActive[u] {
		// systemctl start failed, but the Restart=on-failure unit cycles on.
		return errors.New("systemctl start failed")
	}
	return nil
}

func (s *fakeServices) start(u string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(filepath.Join(s.root, UnitPath(u))); err != nil {
		return errors.New("no such unit")
	}
	if s.active[u] {
		return nil
	}
	if u == GateUnit {
		out, err := osFS{root: s.root}.Run(context.Background(), BinDir+"/forge-gate", "--version")
		if err != nil {
			return errors.New("gate binary does not run")
		}
		s.serving = strings.TrimPrefix(strings.TrimSpace(string(out)), "forge-gate ")
		tok, err := OwnerToken(osFS{root: s.root})
		if err != nil {
			return err
		}
		s.token = tok
	}
	if err := s.stateDirectories(u); err != nil {
		return err
	}
	s.active[u] = true
	return nil
}

// stateDirectories does what the units' StateDirectory= does (private
// directories of the service account); the Gate's also gets a database
// when it has none, like the first start of a real Gate.
func (s *fakeServices) stateDirectories(u string) error {
	r, err := ReadReceipt(osFS{root: s.root})
	if err != nil {
		return err
	}
	dirs, id := []string{WorkerState, WorktreeRoot, RuntimeRoot, RepoRoot}, r.Worker
	if u == GateUnit {
		dirs, id = []string{GateStateDir}, r.Gate
	}
	os.Mkdir(filepath.Join(s.root, StateRoot), 0o755)
	for _, d := range dirs {
		p := filepath.Join(s.root, d)
		os.Mkdir(p, 0o700)
		if err := os.Chown(p, id.UID, id.GID); err != nil {
			return err
		}
	}
	if u != GateUnit {
		return nil
	}
	s.schema = r.SchemaVersion
	db := filepath.Join(s.root, Database)
	if _, err := os.Lstat(db); err == nil {
		// A Gate of this build migrates an older database when it opens
		// it; one of an older release leaves it as it is.
		v, err := store.ReadSchemaVersion(context.Background(), db)
		if err != nil || r.SchemaVersion != store.SchemaVersion || v >= r.SchemaVersion {
			return nil
		}
	}
	dir := filepath.Join(s.root, GateStateDir)
	os.Chown(dir, 0, 0)
	old, _ := filepath.Glob(db + "*")
	for _, p := range old {
		os.Chown(p, 0, 0)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		return err
	}
	st.Close()
	matches, _ := filepath.Glob(db + "*")
	for _, p := range append(matches, dir) {
		if err := os.Chown(p, id.UID, id.GID); err != nil {
			return err
		}
	}
	return nil
}
func (s *fakeServices) Stop(ctx context.Context, u string) error {
	if err := interrupted(ctx); err != nil {
		return err
	}
	if err := s.f.call("stop " + u); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, u)
	if u == GateUnit {
		s.serving = ""
	}
	return nil
}
func (s *fakeServices) IsActive(ctx context.Context, u string) (bool, error) {
	if err := interrupted(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[u], nil
}
func (s *fakeServices) IsEnabled(ctx context.Context, u string) (bool, error) {
	if err := interrupted(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enabled[u], nil
}

func (s *fakeServices) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	gate, worker, serving, token, schema := s.active[GateUnit], s.active[WorkerUnit], s.serving, s.token, s.schema
	v, _, _ := strings.Cut(serving, " ")
	ready := gate && !s.badReady[v]
	if r.Header.Get("Authorization") != "" && s.impostor != 0 {
		s.authSeen++
	}
	s.mu.Unlock()
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path == "/readyz" {
		w.Write([]byte(`{"status":"ready"}`))
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/v1/version":
		v, c, _ := strings.Cut(serving, " ")
		fmt.Fprintf(w, `{"version":%q,"commit":%q,"schema_version":%d}`, v, c, schema)
	case "/v1/debug/workers":
		fmt.Fprintf(w, `{"lanes":[{"lane":"worker-1","worker_id":"worker-1","pool":"local","connected":%v}],"as_of":"x"}`, worker)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

type testHost struct {
	clockMu sync.Mutex
	clock   time.Time
	fs      faultFS
	acc     *fakeAccounts
	svc     *fakeServices
	f       *faults
}

func (h *testHost) FS() FS             { return h.fs }
func (h *testHost) Accounts() Accounts { return h.acc }
func (h *testHost) Services() Services { return h.svc }

// Now is a clock that moves two seconds per reading, so readiness
// deadlines pass after a few polls.
func (h *testHost) Now() time.Time {
	h.clockMu.Lock()
	defer h.clockMu.Unlock()
	h.clock = h.clock.Add(2 * time.Second)
	return h.clock
}

// requireRoot stops a test that needs root (the installer chowns to
// other users). Under CI (CI set, as every CI system does) a missing root
// is a failure, never a skip that would count as a pass.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("installer tests need root and CI is set: run them as root (a skip would hide them)")
	}
	t.Skip("installer tests chown to other users: they need root (CI runs them as root)")
}

// env is one test machine: a temporary root with the trusted ancestors,
// fake accounts and services, and a fake Gate on a private listener.
type env struct {
	t      *testing.T
	root   string
	h      *testHost
	layout Layout
}

func newEnv(t *testing.T) *env {
	t.Helper()
	requireRoot(t)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	for _, d := range []string{"opt", "etc", "etc/systemd", "etc/systemd/system", "var", "var/lib"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &faults{}
	svc := &fakeServices{f: f, root: root, enabled: map[string]bool{}, active: map[string]bool{}, badReady: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: svc}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h := &testHost{fs: faultFS{osFS{root: root}, f}, acc: &fakeAccounts{users: map[string]AccountInfo{}, f: f}, svc: svc, f: f}
	return &env{t: t, root: root, h: h, layout: Layout{Listen: ln.Addr().String()}}
}

// release writes a release set (six Linux archives whose binaries are
// scripts printing their --version line, and SHA256SUMS) and returns the
// request for it.
type releaseOpt struct {
	version, commit string
	mutate          func(kind string, members []tarMember) []tarMember
	sums            func(lines []string) []string
}

type tarMember struct {
	hdr  tar.Header
	data []byte
}

func writeRelease(t *testing.T, o releaseOpt) Request {
	t.Helper()
	dir := t.TempDir()
	var lines []string
	for _, kind := range []string{"cli", "gate", "worker"} {
		for _, arch := range []string{"amd64", "arm64"} {
			var ms []tarMember
			for _, name := range archiveMembers[kind] {
				data := []byte("#!/bin/sh\necho '" + name + " " + o.version + " " + o.commit + "'\n")
				if slices.Contains(AgentPlugins(), name) {
					data = agentPluginScript(name, o.version, o.commit)
				}
				mode := int64(0o755)
				if name == "VERSION" {
					data, mode = []byte(o.version+" "+o.commit+"\n"), 0o644
				}
				ms = append(ms, tarMember{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), Format: tar.FormatUSTAR}, data})
			}
			if o.mutate != nil {
				ms = o.mutate(kind, ms)
			}
			b := tarGz(t, ms)
			name := archiveName(kind, o.version, arch)
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, sha256hex(b)+"  "+name)
		}
	}
	if o.sums != nil {
		lines = o.sums(lines)
	}
	sums := []byte(strings.Join(lines, "\n") + "\n")
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	return Request{Version: o.version, Commit: o.commit, AssetDir: dir, SumsSHA256: sha256hex(sums)}
}

// agentCLILine is the --cli line of the test release's agent plugin name:
// forge-x-plugin drives x, named by X_BIN, checked against @example/x@1.0.0.
func agentCLILine(name string) string {
	agent := strings.TrimSuffix(strings.TrimPrefix(name, "forge-"), "-plugin")
	return strings.ToUpper(agent) + "_BIN " + agent + " @example/" + agent + "@1.0.0"
}

// agentPluginScript prints the version line for --version, its CLI for
// --cli (agentCLILine) and otherwise
// answers a protocol v1 initialize as a workspace_edit plugin, then fails
// (no execute follows), as forge doctor's handshake expects.
func agentPluginScript(name, version, commit string) []byte {
	return []byte("#!/bin/sh\n" +
		"if [ \"$1\" = --version ]; then echo '" + name + " " + version + " " + commit + "'; exit 0; fi\n" +
		"if [ \"$1\" = --cli ]; then echo '" + agentCLILine(name) + "'; exit 0; fi\n" +
		"read -r line\n" +
		"id=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\"\\([0-9a-f]*\\)\".*/\\1/p')\n" +
		"printf '{\"version\":\"v1\",\"id\":\"%s\",\"type\":\"initialized\",\"capabilities\":[\"workspace_edit\"]}\\n' \"$id\"\n" +
		"exit 1\n")
}

func tarGz(t *testing.T, ms []tarMember) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, m := range ms {
		h := m.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write(m.data)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func commitOf(c byte) string { return strings.Repeat(string(c), 40) }

// run executes one installer run with the installer's identity set to the
// request's release.
func (e *env) run(req Request) (error, string) {
	var out bytes.Buffer
	err := Run(context.Background(), e.h, e.layout, Self{Version: req.Version, Commit: req.Commit, Schema: store.SchemaVersion}, req, &out)
	return err, out.String()
}

func (e *env) mustRun(req Request) {
	e.t.Helper()
	if err, out := e.run(req); err != nil {
		e.t.Fatalf("install %s: %v (%s)", req.Version, err, out)
	}
}

// digest summarises the whole root: every path's type, mode, owner, size,
// content digest and (for files) mtime; directory mtimes are left out
// because creating and removing a sibling changes them.
func (e *env) digest() string {
	e.t.Helper()
	var lines []string
	err := filepath.Walk(e.root, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.root, p)
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %v %d:%d", rel, fi.Mode(), st.Uid, st.Gid)
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			line += fmt.Sprintf(" %d %s %d", fi.Size(), hex.EncodeToString(s[:]), fi.ModTime().UnixNano())
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// state summarises accounts and services.
func (e *env) state() string {
	s := e.h.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	_, gate, _ := e.h.acc.Lookup(GateAccount)
	_, worker, _ := e.h.acc.Lookup(WorkerAccount)
	return fmt.Sprintf("accounts=%v,%v enabled=%v active=%v serving=%q stale=%v", gate, worker, s.enabled, s.active, s.serving, s.stale())
}

func wantCode(t *testing.T, err error, code int) *Error {
	t.Helper()
	var ie *Error
	if !errors.As(err, &ie) || ie.Code != code {
		t.Fatalf("error %v, want exit %d", err, code)
	}
	if strings.ContainsAny(ie.Msg, "\n") {
		t.Fatalf("multi-line message %q", ie.Msg)
	}
	return ie
}
