package acceptance

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/cgrouptest"
)

// binDir holds the binaries built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "forge-acceptance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator),
		"./cmd/forge-gate", "./cmd/forge-worker", "./cmd/forge-ref-plugin", "./cmd/forge")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// statSources stats every Go source and module file of the repository from
// the test process, so that go test's result cache (which tracks files the
// test itself touches, not what the go build child reads) is invalidated
// whenever the code under test changes. It must run inside m.Run: the
// testing package records touched files only while tests run, so bin
// does it once, from the first test that needs a binary.
func statSources(root string) {
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".py") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			os.Stat(p)
		}
		return nil
	})
}

var trackSources sync.Once

func bin(name string) string {
	trackSources.Do(func() { statSources(filepath.Join("..", "..")) })
	return filepath.Join(binDir, name)
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// logSink collects a process's stderr and signals every write.
type logSink struct {
	mu     sync.Mutex
	b      bytes.Buffer
	notify chan struct{}
}

func newLogSink() *logSink { return &logSink{notify: make(chan struct{}, 1)} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return n, err
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor blocks until a JSON log line satisfies match, or fails the test
// after a generous bound (a liveness guard, not a timing assertion).
func (s *logSink) waitFor(t testing.TB, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	guard := time.NewTimer(60 * time.Second)
	defer guard.Stop()
	for {
		for _, line := range strings.Split(s.String(), "\n") {
			var ev map[string]any
			if json.Unmarshal([]byte(line), &ev) == nil && match(ev) {
				return ev
			}
		}
		select {
		case <-s.notify:
		case <-guard.C:
			t.Fatalf("no log line %q; log:\n%s", what, s.String())
		}
	}
}

// gateOpts configures one Gate.
type gateOpts struct {
	leaseTTL      string
	retryBase     string
	maxAttempts   int
	recovery      string
	pluginTimeout string
	outputBytes   int
	listen        string       // default 127.0.0.1:0
	environment   string       // JSON array of policy variables, default ["PATH"]
	codingRepo    bool         // register repository "demo" (plugin "edit")
	workers       []gateWorker // default: worker-1, concurrency 1
}

type gateWorker struct {
	id          string
	concurrency int
	token       string
}

// gate is a running (or restartable) forge-gate.
type gate struct {
	t       testing.TB
	dir     string
	cfgPath string
	owner   string
	workers []gateWorker
	env     []string
	addr    string
	cmd     *exec.Cmd
	logs    *logSink
	done    chan error
	// allLogs accumulates the logs of every run of this Gate.
	allLogs []*logSink
}

func newGate(t testing.TB, o gateOpts) *gate {
	t.Helper()
	if o.leaseTTL == "" {
		o.leaseTTL = "30s"
	}
	if o.retryBase == "" {
		o.retryBase = "100ms"
	}
	if o.maxAttempts == 0 {
		o.maxAttempts = 3
	}
	if o.recovery == "" {
		o.recovery = "100ms"
	}
	if o.pluginTimeout == "" {
		o.pluginTimeout = "1m"
	}
	if o.outputBytes == 0 {
		o.outputBytes = 1048576
	}
	if o.environment == "" {
		o.environment = `["PATH"]`
	}
	if o.listen == "" {
		o.listen = "127.0.0.1:0"
	}
	if len(o.workers) == 0 {
		o.workers = []gateWorker{{id: "worker-1", concurrency: 1}}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	g := &gate{t: t, dir: dir, owner: "owner-" + randHex(t, 16)}
	g.env = []string{"PATH=" + os.Getenv("PATH"), "ACC_OWNER_TOKEN=" + g.owner}
	var ws []string
	for i, w := range o.workers {
		w.token = "worker-" + randHex(t, 16)
		env := fmt.Sprintf("ACC_WORKER_TOKEN_%d", i)
		g.env = append(g.env, env+"="+w.token)
		g.workers = append(g.workers, w)
		ws = append(ws, fmt.Sprintf(`{"id":%q,"pool":"local","token_env":%q,"concurrency":%d}`, w.id, env, w.concurrency))
	}
	repos := "[]"
	if o.codingRepo {
		repos = `[{"id":"demo","default_branch":"main","worker_pool":"local","execution":{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}]`
	}
	cfg := fmt.Sprintf(`{"version":1,"listen":%q,"database":%q,"owner_token_env":"ACC_OWNER_TOKEN",`+
		`"recovery_interval":%q,"lease_poll_interval":"50ms","default_pool":"local",`+
		`"lifecycle":{"lease_ttl":%q,"retry_base":%q,"max_attempts":%d},`+
		`"default_execution":{"plugin_id":"reference","environment":%s,"plugin_timeout":%q,"check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":%d,"check_output_bytes":2048,"git_output_bytes":1048576},`+
		`"workers":[%s],"repositories":%s}`,
		o.listen, filepath.Join(dir, "state", "forge.db"), o.recovery, o.leaseTTL, o.retryBase, o.maxAttempts, o.environment, o.pluginTimeout, o.outputBytes, strings.Join(ws, ","), repos)
	g.cfgPath = filepath.Join(dir, "gate.json")
	if err := os.WriteFile(g.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.kill)
	g.start()
	return g
}

// start runs the Gate and waits for its listening address and readiness.
func (g *gate) start() {
	t := g.t
	t.Helper()
	g.logs = newLogSink()
	g.allLogs = append(g.allLogs, g.logs)
	cmd := exec.Command(bin("forge-gate"), "-config", g.cfgPath)
	cmd.Env = g.env
	cmd.Stdout = g.logs
	cmd.Stderr = g.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.cmd = cmd
	g.done = make(chan error, 1)
	go func() { g.done <- cmd.Wait() }()
	ev := g.logs.waitFor(t, "listening", func(e map[string]any) bool { return e["msg"] == "listening" })
	g.addr = ev["addr"].(string)
	// Ready only once /readyz says so (documented: 503 until then).
	guard := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(g.url() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(guard) {
			t.Fatalf("gate never ready; log:\n%s", g.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill SIGKILLs the Gate (no-op when it is not running).
func (g *gate) kill() {
	if g.cmd == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	<-g.done
	g.cmd = nil
}

// stop sends SIGTERM and returns the exit error.
func (g *gate) stop() error {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	err := <-g.done
	g.cmd = nil
	return err
}

func (g *gate) url() string   { return "http://" + g.addr }
func (g *gate) wsURL() string { return "ws://" + g.addr }

// logText is every log line of every run of this Gate.
func (g *gate) logText() string {
	var b strings.Builder
	for _, l := range g.allLogs {
		b.WriteString(l.String())
	}
	return b.String()
}

// assertNoSecrets checks that no token (and none of extra) appears in any
// Gate log line.
func (g *gate) assertNoSecrets(t testing.TB, extra ...string) {
	t.Helper()
	logs := g.logText()
	for _, s := range append([]string{g.owner}, extra...) {
		if s != "" && strings.Contains(logs, s) {
			t.Errorf("gate log contains a secret or task value %q", s)
		}
	}
	for _, w := range g.workers {
		if strings.Contains(logs, w.token) {
			t.Errorf("gate log contains a worker token")
		}
	}
}

// httpResult is one owner-API exchange.
type httpResult struct {
	status int
	header http.Header
	body   []byte
}

var client = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// do sends a request with the given Authorization values (none when nil).
func (g *gate) do(t testing.TB, method, path string, body io.Reader, auth ...string) httpResult {
	t.Helper()
	req, err := http.NewRequest(method, g.url()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		t.Fatal(err)
	}
	return httpResult{resp.StatusCode, resp.Header, b}
}

func (g *gate) bearer() string { return "Bearer " + g.owner }

func (g *gate) submit(t testing.TB, task string) string {
	t.Helper()
	r := g.do(t, "POST", "/v1/jobs", strings.NewReader(task), g.bearer())
	if r.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var job struct{ ID string }
	if err := json.Unmarshal(r.body, &job); err != nil || job.ID == "" {
		t.Fatalf("submit answer %s: %v", r.body, err)
	}
	return job.ID
}

type apiJob struct {
	ID           string  `json:"id"`
	Kind         string  `json:"kind"`
	Status       string  `json:"status"`
	FailureCode  string  `json:"failure_code"`
	Result       *string `json:"result"`
	AttemptCount int     `json:"attempt_count"`
}

type apiAttempt struct {
	ID          string            `json:"id"`
	Ordinal     int               `json:"ordinal"`
	Status      string            `json:"status"`
	WorkerID    string            `json:"worker_id"`
	Disposition string            `json:"disposition"`
	FailureCode string            `json:"failure_code"`
	Evidence    []json.RawMessage `json:"evidence"`
}

type apiEvent struct {
	Seq     int    `json:"seq"`
	Type    string `json:"type"`
	Attempt int    `json:"attempt"`
	Code    string `json:"code"`
}

type aggregate struct {
	Job      apiJob       `json:"job"`
	Attempts []apiAttempt `json:"attempts"`
	Events   []apiEvent   `json:"events"`
}

func (g *gate) job(t testing.TB, id string) apiJob {
	t.Helper()
	r := g.do(t, "GET", "/v1/jobs/"+id, nil, g.bearer())
	if r.status != http.StatusOK {
		t.Fatalf("job: %d %s", r.status, r.body)
	}
	var j apiJob
	if err := json.Unmarshal(r.body, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func (g *gate) aggregate(t testing.TB, id string) aggregate {
	t.Helper()
	r := g.do(t, "GET", "/v1/jobs/"+id+"/aggregate", nil, g.bearer())
	if r.status != http.StatusOK {
		t.Fatalf("aggregate: %d %s", r.status, r.body)
	}
	var a aggregate
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// waitJob polls the job until cond holds (bounded liveness guard).
func (g *gate) waitJob(t testing.TB, id string, what string, cond func(apiJob) bool) apiJob {
	t.Helper()
	guard := time.Now().Add(90 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		j := g.job(t, id)
		if cond(j) {
			return j
		}
		if time.Now().After(guard) {
			t.Fatalf("job never %s; last %+v\naggregate %+v\ngate log:\n%s", what, j, g.aggregate(t, id), g.logText())
		}
		<-tick.C
	}
}

func (g *gate) waitTerminal(t testing.TB, id string) apiJob {
	t.Helper()
	return g.waitJob(t, id, "terminal", func(j apiJob) bool { return j.Status == "succeeded" || j.Status == "failed" })
}

// worker is a running forge-worker.
type worker struct {
	cmd  *exec.Cmd
	logs *logSink
	done chan error
	dir  string
}

type workerOpts struct {
	index       int               // which gate worker (default 0)
	plugins     map[string]string // plugin id -> executable (default reference -> forge-ref-plugin)
	concurrency int
	heartbeat   string
	env         []string
	pins        map[string]string // plugin id -> sha256
	repoRoot    string            // with repoPath: serve repository "demo"
	repoPath    string
	dir         string // reuse this state directory (a restarted Worker)
	// sandbox is worker.json's "sandbox" (default absent: Landlock, as an
	// installed Worker runs); "none" only where a test must see what the
	// Worker's own checks do behind the sandbox.
	sandbox string
	// readPaths are sandbox_read_paths: directories the test writes (flags
	// a sandboxed plugin or check waits for) and the sandbox lets it read.
	readPaths []string
}

func (g *gate) startWorker(t testing.TB, o workerOpts) *worker {
	t.Helper()
	w := g.workers[o.index]
	if o.plugins == nil {
		o.plugins = map[string]string{"reference": bin("forge-ref-plugin")}
	}
	if o.concurrency == 0 {
		o.concurrency = w.concurrency
	}
	if o.heartbeat == "" {
		o.heartbeat = "200ms"
	}
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	var ps []string
	for id, p := range o.plugins {
		if pin := o.pins[id]; pin != "" {
			ps = append(ps, fmt.Sprintf(`{"id":%q,"argv":[%q],"sha256":%q}`, id, p, pin))
			continue
		}
		ps = append(ps, fmt.Sprintf(`{"id":%q,"argv":[%q]}`, id, p))
	}
	roots, repos := "[]", "[]"
	if o.repoPath != "" {
		roots, repos = fmt.Sprintf("[%q]", o.repoRoot), fmt.Sprintf(`[{"id":"demo","path":%q}]`, o.repoPath)
	}
	sb := ""
	if o.sandbox != "" {
		sb += fmt.Sprintf(`"sandbox":%q,`, o.sandbox)
	}
	if len(o.readPaths) > 0 {
		rp, _ := json.Marshal(o.readPaths)
		sb += `"sandbox_read_paths":` + string(rp) + ","
	}
	cfg := fmt.Sprintf(`{"version":1,`+sb+`"gate_url":%q,"id":%q,"token_env":"ACC_WORKER_TOKEN","heartbeat_interval":%q,"concurrency":%d,`+
		`"repository_roots":%s,"worktree_root":%q,"runtime_root":%q,"repositories":%s,"plugins":[%s],"environment_allowlist":["PATH"],"check_environment_allowlist":["PATH"],`+
		`"ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}`,
		g.wsURL(), w.id, o.heartbeat, o.concurrency, roots, filepath.Join(dir, "worktrees"), filepath.Join(dir, "runtime"), repos, strings.Join(ps, ","))
	cfgPath := filepath.Join(dir, "worker.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	wk := &worker{logs: newLogSink(), done: make(chan error, 1), dir: dir}
	cmd := exec.Command(bin("forge-worker"), "-config", cfgPath)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "ACC_WORKER_TOKEN=" + w.token}, o.env...)
	// In a cgroup of its own, as a sandboxed Worker needs (docs/sandbox.md,
	// "Containment"), started right in it.
	cg, err := os.Open(cgrouptest.Own(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	cmd.Stdout, cmd.Stderr = wk.logs, wk.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wk.cmd = cmd
	go func() { wk.done <- cmd.Wait() }()
	t.Cleanup(wk.kill)
	for i := 0; i < o.concurrency; i++ {
		n := i
		wk.logs.waitFor(t, "connected", func(e map[string]any) bool {
			return e["msg"] == "connected" && countConnected(wk.logs.String()) > n
		})
	}
	// Every Worker but the few that opt out runs its plugins and checks
	// sandboxed, as an installed Worker does: a test that passes proves
	// its point with the sandbox on.
	if want := o.sandbox; want == "" {
		wk.logs.waitFor(t, "sandbox landlock", func(e map[string]any) bool { return e["msg"] == "sandbox" && e["sandbox"] == "landlock" })
	}
	return wk
}

func countConnected(s string) int { return strings.Count(s, `"msg":"connected"`) }

func (w *worker) kill() {
	if w.cmd == nil {
		return
	}
	_ = w.cmd.Process.Kill()
	<-w.done
	w.cmd = nil
}

// scanLines is a helper for reading small files line by line.
func scanLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
