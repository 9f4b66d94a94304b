package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
	"github.com/0k-lab/agent-forge/pkg/sandbox"
	"github.com/0k-lab/agent-forge/pkg/supervise"
	"github.com/0k-lab/agent-forge/pkg/wire"
)

// buildBinaries builds the reference plugin and forge-worker (whose reaper
// mode wraps each plugin on Linux) into dir the way release binaries are
// built (scripts/build-release.sh): CGO_ENABLED=0, stripped. A cgo build of
// forge-worker links libc dynamically, and every wrapper start then pays
// for the dynamic loader too.
func buildBinaries(b *testing.B, dir string) (plugin, reaper string) {
	b.Helper()
	plugin, reaper = filepath.Join(dir, "forge-ref-plugin"), filepath.Join(dir, "forge-worker")
	for out, pkg := range map[string]string{plugin: "../../cmd/forge-ref-plugin", reaper: "../../cmd/forge-worker"} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("build %s: %v", pkg, err)
		}
	}
	return plugin, reaper
}

// phase is one measured part of the benchmark: operations per second of
// wall time and CPU milliseconds per operation (this process and every
// process it reaped, see processCPU). On a machine shared with other work
// the CPU figure is the steadier one.
type phase struct {
	rate, cpuMS float64
	commits     float64 // Gate store commits per operation (end-to-end phases)
}

// mark is the start of a phase: wall clock and processCPU.
type mark struct {
	start time.Time
	cpu   time.Duration
}

func begin() mark { return mark{time.Now(), processCPU()} }

// end ends a phase of n operations. Long-lived reapers and the plugins
// they ran count towards processCPU only once the reapers have exited and
// been reaped, so the pool (when there is one) is closed after the clock
// stops and before the CPU time is read.
func (m mark) end(n int, reapers *supervise.ReaperPool) phase {
	elapsed := time.Since(m.start)
	if reapers != nil {
		reapers.Close()
	}
	return phase{
		rate:  float64(n) / elapsed.Seconds(),
		cpuMS: float64((processCPU() - m.cpu).Microseconds()) / float64(n) / 1000,
	}
}

// bareSpawnRate runs the plugin binary n times with 2 concurrent spawners
// (spawn and wait, empty stdin).
func bareSpawnRate(b *testing.B, plugin string, n int) phase {
	b.Helper()
	jobs := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	m := begin()
	var wg sync.WaitGroup
	for s := 0; s < 2; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				cmd := exec.Command(plugin)
				cmd.Env = []string{}
				_ = cmd.Run() // empty stdin: the plugin exits 1 at once; only the spawn matters
			}
		}()
	}
	wg.Wait()
	return m.end(n, nil)
}

// bareSessionRate runs n complete text sessions of the plugin through the
// plugin runner (under a pool of reapers started from reaper when set, in
// the sandbox sb makes when it is not nil, the policy made for every
// session as the Worker makes it), without Gate or Worker, with 2
// concurrent runners.
func bareSessionRate(b *testing.B, exe, reaper string, sb *sandboxRules, n int) phase {
	b.Helper()
	dir := b.TempDir()
	var reapers *supervise.ReaperPool
	if reaper != "" {
		reapers = supervise.NewReaperPool(reaper)
	}
	m := begin()
	if err := runSessions(exe, reapers, sb, dir, 2, n); err != nil {
		b.Fatal(err)
	}
	return m.end(n, reapers)
}

// runSessions runs n complete text sessions of the plugin exe through the
// plugin runner in dir, with the given number of concurrent runners.
func runSessions(exe string, reapers *supervise.ReaperPool, sb *sandboxRules, dir string, runners, n int) error {
	jobs := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	errs := make(chan error, runners)
	for s := 0; s < runners; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				_, err := host.Run(context.Background(), host.Command{Path: exe, Env: []string{}, Dir: dir, OutputBytes: 1 << 20, Reaper: reapers,
					Sandbox: sb.policy(sandboxDirs{rw: []string{dir}})},
					host.Request{Offer: []plugin.Capability{plugin.CapText, plugin.CapProgress, plugin.CapCancel}, Operation: plugin.OpText, Input: "benchmark input"}, nil)
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// submitRate submits n text jobs one after another over HTTP to a real
// Gate (SQLite file) that has no Worker: what accepting a job durably costs
// before anything runs it, the part of every end-to-end job no Worker or
// plugin design can remove.
func submitRate(b *testing.B, n int) phase {
	b.Helper()
	state := filepath.Join(b.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		b.Fatal(err)
	}
	rg := startRealGate(b, gateJSON(filepath.Join(state, "forge.db"), 2, "30s", "1s", 3, "reference"), "")
	defer rg.stop()
	m := begin()
	for i := 0; i < n; i++ {
		if err := postJob(rg.addr, "benchmark input"); err != nil {
			b.Fatal(err)
		}
	}
	return m.end(n, nil)
}

// pluginCPU runs the plugin n times each way, alternating and one at a
// time: a bare spawn-and-wait (empty stdin) and a complete text session
// driven directly over its pipes. It returns the median CPU time (user +
// system, from each child's own rusage) of each, so drift on a shared
// machine touches both alike and outliers do not move them.
func pluginCPU(b *testing.B, exe string, n int) (bare, session time.Duration) {
	b.Helper()
	var bares, sessions []time.Duration
	for i := 0; i < n; i++ {
		cmd := exec.Command(exe)
		cmd.Env = []string{}
		_ = cmd.Run() // empty stdin: the plugin exits 1 at once
		bares = append(bares, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		d, err := sessionCPU(exe)
		if err != nil {
			b.Fatal(err)
		}
		sessions = append(sessions, d)
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	return median(bares), median(sessions)
}

// sessionCPU runs one complete text session with the plugin and returns
// the plugin process's CPU time.
func sessionCPU(exe string) (time.Duration, error) {
	cmd := exec.Command(exe)
	cmd.Env = []string{}
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if err := driveSession(in, bufio.NewReader(out)); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, err
	}
	if err := cmd.Wait(); err != nil {
		return 0, err
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// driveSession speaks the Worker's side of one text session: initialize,
// execute, frames up to the terminal one, then stdin closed and stdout
// drained.
func driveSession(in io.WriteCloser, out *bufio.Reader) error {
	const id = "0123456789abcdef0123456789abcdef"
	read := func() (plugin.Frame, error) {
		line, err := plugin.ReadFrame(out)
		if err != nil {
			return plugin.Frame{}, err
		}
		return plugin.DecodeFrame(line)
	}
	if err := plugin.WriteFrame(in, plugin.Frame{ID: id, Type: plugin.TypeInitialize,
		Capabilities: []plugin.Capability{plugin.CapText, plugin.CapProgress, plugin.CapCancel}, Limits: plugin.V1Limits()}); err != nil {
		return err
	}
	if _, err := read(); err != nil {
		return err
	}
	if err := plugin.WriteFrame(in, plugin.Frame{ID: id, Type: plugin.TypeExecute, Operation: plugin.OpText, Input: "benchmark input"}); err != nil {
		return err
	}
	for {
		f, err := read()
		if err != nil {
			return err
		}
		if f.Type.Terminal() {
			break
		}
	}
	if err := in.Close(); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, out)
	return err
}

// floorPercent is the highest e2e/bare ratio, in CPU, that any Gate and
// Worker could reach in this run: a job costs at least a bare spawn, the
// plugin's own share of its protocol session (protocol: the median
// session's plugin CPU beyond the median bare spawn's, pluginCPU) and the
// durable HTTP submit, even if leasing, the WebSocket, the runner, the
// wrapper and recording the result cost nothing.
func floorPercent(bare phase, protocol time.Duration, submits phase) float64 {
	p := max(0, float64(protocol.Microseconds())/1000)
	return 100 * bare.cpuMS / (bare.cpuMS + p + submits.cpuMS)
}

// wrappedFloorPercent is the same ceiling for the design as specified: on
// Linux every invocation runs under the child-subreaper wrapper, so a job
// costs at least one complete wrapped session through the plugin runner
// (wrapped: the plugin, the runner and the wrapper, measured without Gate
// or Worker) and one durable submit, even if leasing, the WebSocket,
// recording the result and the Worker's lane cost nothing.
func wrappedFloorPercent(bare, wrapped, submits phase) float64 {
	return 100 * bare.cpuMS / (wrapped.cpuMS + submits.cpuMS)
}

// BenchmarkEndToEndText measures text jobs/s through the real Gate
// (in-process, SQLite file) and a Worker with 2 lanes running the
// reference plugin under the forge-worker subreaper wrapper, next to the
// bare spawn-and-wait rate of the same plugin binary with 2 concurrent
// spawners, in the same run. Metrics: e2e-jobs/s, bare-spawns/s,
// e2e/bare-% (the target: at least 60), e2e/bare-floor-% (the
// ceiling on that ratio this machine allows, see floorPercent, from
// plugin-protocol-cpu-ms and submit-cpu-ms) and e2e/bare-floor-wrapped-%
// (the ceiling once the mandated wrapper and the runner count too, see
// wrappedFloorPercent). For context:
// bare-sessions/s and wrapped-sessions/s (complete protocol sessions
// through the plugin runner, 2 concurrent, without and with the wrapper),
// e2e-backlog-jobs/s (the same jobs submitted before the Worker starts,
// so submission does not compete with execution), e2e-pinned-jobs/s (as
// e2e-jobs/s with the plugin's sha256 pinned, so it is hashed before every
// invocation), no-plugin-jobs/s (Gate and Worker with an executor that
// answers at once: the cost of everything but the plugin process;
// no-plugin-gate+worker-cpu-ms/job is the same with the submitter in a
// child process whose CPU is not counted) and e2e-commits/job (durable
// Gate commits). The same phases also report CPU
// milliseconds per operation (*-cpu-ms*), counting this process (Gate,
// Worker, load generator) and every process it reaped (plugins,
// wrappers); bare/e2e-cpu-% is the bare spawn's share of an end-to-end
// job's CPU, the target's ratio expressed in CPU rather than in wall-clock
// rates, which a shared machine disturbs. Each iteration is one round of
// every phase; the metrics are medians over the rounds (-benchtime Nx).
func BenchmarkEndToEndText(b *testing.B) {
	const jobs = 200
	plugin, reaper := buildBinaries(b, b.TempDir())
	digest, err := fileSHA256(plugin)
	if err != nil {
		b.Fatal(err)
	}
	rounds := newRounds()
	for i := 0; i < b.N; i++ {
		report := rounds.next()
		bare := bareSpawnRate(b, plugin, jobs)
		sessions := bareSessionRate(b, plugin, "", nil, jobs)
		wrapped := bareSessionRate(b, plugin, reaper, nil, jobs)
		text := func(c *Config, reapers *supervise.ReaperPool) Executor {
			return NewTextExecutor(c, os.LookupEnv, reapers)
		}
		e2e, failed := endToEndRate(b, plugin, reaper, "", text, jobs, submitLive)
		backlog, failedBacklog := endToEndRate(b, plugin, reaper, "", text, jobs, submitBacklog)
		pinned, failedPinned := endToEndRate(b, plugin, reaper, digest, text, jobs, submitLive)
		instant := func(*Config, *supervise.ReaperPool) Executor { return instantExec{} }
		noPlugin, _ := endToEndRate(b, plugin, reaper, "", instant, jobs, submitLive)
		noPluginGW, _ := endToEndRate(b, plugin, reaper, "", instant, jobs, submitExternal)
		submits := submitRate(b, jobs)
		bareChild, sessionChild := pluginCPU(b, plugin, jobs)
		protocol := sessionChild - bareChild
		report(float64(failed+failedBacklog+failedPinned), "failed-attempts")
		report(backlog.rate, "e2e-backlog-jobs/s")
		report(pinned.rate, "e2e-pinned-jobs/s")
		report(noPlugin.rate, "no-plugin-jobs/s")
		report(sessions.rate, "bare-sessions/s")
		report(wrapped.rate, "wrapped-sessions/s")
		report(e2e.rate, "e2e-jobs/s")
		report(bare.rate, "bare-spawns/s")
		report(100*e2e.rate/bare.rate, "e2e/bare-%")
		report(floorPercent(bare, protocol, submits), "e2e/bare-floor-%")
		report(wrappedFloorPercent(bare, wrapped, submits), "e2e/bare-floor-wrapped-%")
		report(float64(protocol.Microseconds())/1000, "plugin-protocol-cpu-ms")
		report(submits.cpuMS, "submit-cpu-ms")
		report(e2e.commits, "e2e-commits/job")
		report(bare.cpuMS, "bare-cpu-ms/spawn")
		report(sessions.cpuMS, "bare-session-cpu-ms")
		report(wrapped.cpuMS, "wrapped-session-cpu-ms")
		report(e2e.cpuMS, "e2e-cpu-ms/job")
		report(pinned.cpuMS, "e2e-pinned-cpu-ms/job")
		report(noPlugin.cpuMS, "no-plugin-cpu-ms/job")
		report(noPluginGW.cpuMS, "no-plugin-gate+worker-cpu-ms/job")
		report(100*bare.cpuMS/e2e.cpuMS, "bare/e2e-cpu-%")
	}
	rounds.reportMedians(b)
}

// rounds collects a benchmark's metrics round by round (one b.N iteration
// runs every phase once, so the phases alternate) and reports each
// metric's median over the rounds, with every round's value in the log.
type rounds struct {
	order  []string
	values map[string][]float64
}

func newRounds() *rounds { return &rounds{values: map[string][]float64{}} }

// next starts a round and returns the function that records its metrics.
func (r *rounds) next() func(v float64, unit string) {
	return func(v float64, unit string) {
		if _, ok := r.values[unit]; !ok {
			r.order = append(r.order, unit)
		}
		r.values[unit] = append(r.values[unit], v)
	}
}

func (r *rounds) reportMedians(b *testing.B) {
	// One log line: a benchmark's log is cut after a few lines.
	var all strings.Builder
	for _, unit := range r.order {
		vs := slices.Clone(r.values[unit])
		slices.Sort(vs)
		m := vs[len(vs)/2]
		if len(vs)%2 == 0 {
			m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
		}
		b.ReportMetric(m, unit)
		fmt.Fprintf(&all, " %s=%.4g%.4g", unit, m, r.values[unit])
	}
	b.Logf("medians of %d rounds, then every round:%s", b.N, all.String())
}

// submission is how endToEndRate submits its jobs.
type submission int

const (
	// submitLive posts the jobs one after another from a goroutine of
	// this process while the Worker runs: the submitter's CPU counts.
	submitLive submission = iota
	// submitBacklog submits every job before the Worker starts.
	submitBacklog
	// submitExternal posts them like submitLive but from a child process
	// (submitterArg) whose CPU is subtracted: Gate and Worker alone.
	submitExternal
)

// endToEndRate returns attempts reported per second over n submitted jobs
// and how many of those attempts failed (a loaded machine can miss the
// plugin protocol's 250 ms exit window; Gate retries such attempts). how
// says when and from where the jobs are submitted. A non-empty pin is the
// plugin's sha256 in the config.
func endToEndRate(b *testing.B, plugin, reaper, pin string, executor func(*Config, *supervise.ReaperPool) Executor, n int, how submission) (phase, int) {
	b.Helper()
	dir := b.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		b.Fatal(err)
	}
	reapers := supervise.NewReaperPool(reaper)
	defer reapers.Close() // mark.end closes it first on success
	rg := startRealGate(b, gateJSON(filepath.Join(state, "forge.db"), 2, "30s", "1s", 3, "reference"), "")
	defer rg.stop()
	c := &Config{
		Sandbox: SandboxNone, // see hostFixture
		GateURL: rg.url(), ID: "worker-1", TokenEnv: "WTOKEN", HeartbeatInterval: 10 * time.Second, Concurrency: 2,
		WorktreeRoot: filepath.Join(dir, "wt"), RuntimeRoot: filepath.Join(dir, "rt"),
		Plugins:              []Plugin{{ID: "reference", Argv: []string{plugin}, SHA256: pin}},
		EnvironmentAllowlist: []string{"PATH"},
		Ceilings: Ceilings{PluginTimeout: time.Hour, CheckTimeout: time.Hour, GitTimeout: time.Hour, CleanupTimeout: 10 * time.Second,
			PluginOutputBytes: 1 << 20, CheckOutputBytes: 2048, GitOutputBytes: 1 << 20},
	}
	if _, err := CheckHost(c, func(string) string { return testToken }); err != nil {
		b.Fatal(err)
	}
	reported := make(chan Event, n)
	connected := make(chan Event, 2)
	w := New(Options{Config: c, Token: testToken,
		Executors: map[wire.Kind]Executor{wire.KindText: executor(c, reapers)},
		Observe: func(e Event) {
			var ch chan Event
			switch e.Kind {
			case EventReported:
				ch = reported
			case EventConnected:
				ch = connected
			}
			select {
			case ch <- e: // nil ch (other events) never selected
			default: // retries beyond n, reconnects: nobody waits for them
			}
		}})
	if how == submitBacklog {
		for i := 0; i < n; i++ {
			rg.submit("benchmark input")
		}
	}
	commits0 := rg.st.Stats().Commits
	m := begin()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	var child *exec.Cmd
	if how != submitBacklog {
		// Submits start once both lanes are connected, and so does the
		// phase.
		<-connected
		<-connected
		commits0 = rg.st.Stats().Commits
		m = begin()
	}
	switch how {
	case submitLive:
		go func() {
			for i := 0; i < n; i++ {
				if err := postJob(rg.addr, "benchmark input"); err != nil {
					reported <- Event{Kind: EventReported, Code: "submit_failed"}
				}
			}
		}()
	case submitExternal:
		child = exec.Command(os.Args[0], submitterArg, rg.addr, strconv.Itoa(n))
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			b.Fatal(err)
		}
	}
	failed := 0
	for i := 0; i < n; i++ {
		if e := <-reported; e.Code != "" {
			failed++
		}
	}
	var childCPU time.Duration
	if child != nil {
		// Reaped before the phase ends, so that its CPU, which processCPU
		// then includes, can be taken out again.
		if err := child.Wait(); err != nil {
			b.Fatalf("submitter: %v", err)
		}
		childCPU = child.ProcessState.UserTime() + child.ProcessState.SystemTime()
	}
	p := m.end(n, reapers)
	p.cpuMS -= float64(childCPU.Microseconds()) / float64(n) / 1000
	p.commits = float64(rg.st.Stats().Commits-commits0) / float64(n)
	return p, failed
}

// submitter is the submitterArg mode: it posts count text jobs to the
// Gate at address, one after another, and fails at the first refusal.
func submitter(args []string) int {
	if len(args) != 2 {
		return 2
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		return 2
	}
	for i := 0; i < n; i++ {
		if err := postJob(args[0], "benchmark input"); err != nil {
			fmt.Fprintln(os.Stderr, "submitter:", err)
			return 1
		}
	}
	return 0
}

// postJob submits a text job without the testing.TB helpers, for use off
// the benchmark goroutine.
func postJob(addr, input string) error {
	body, _ := json.Marshal(map[string]string{"input": input})
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+ownerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("submit: status %d", resp.StatusCode)
	}
	return nil
}

// instantExec answers every text lease at once, without a plugin.
type instantExec struct{}

func (instantExec) Execute(context.Context, *Attempt) Report {
	return Report{Succeeded: true, Output: "BENCHMARK INPUT"}
}

// BenchmarkPluginDigest is the cost of the sha256 pin check made before
// every invocation of a pinned plugin: hashing the reference plugin binary
// (built as released). SetBytes makes the MB/s figure the hash rate.
func BenchmarkPluginDigest(b *testing.B) {
	plugin, _ := buildBinaries(b, b.TempDir())
	fi, err := os.Stat(plugin)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := fileSHA256(plugin); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSandboxCost is what the Landlock sandbox adds to a plugin
// session: wrapped-session-cpu-ms is a complete text session of the
// reference plugin under the reapers (as the Worker runs it: the plugin
// runner, the reaper, the plugin; no Gate, no lease), and
// sandboxed-session-cpu-ms the same in the sandbox the Worker builds (the
// system trees, /etc, the plugin, its run directory: one policy per
// session, one Landlock domain per start, the shared rules prepared once
// per reaper, the metadata filter once per guarded reaper).
// excluding-session-cpu-ms is the sandbox of a Worker whose config lies in
// /etc (as an installed one's does): the shared read layer that leaves it
// out, built once per reaper, is copied into every domain. sandbox-cost-%
// and excluding-cost-% are the differences, round by round, as a share of
// the same round's wrapped session (target < 10); the -us metrics the same
// differences in microseconds. floor-session is the same sandboxed start
// with a domain of one rule that grants everything: what starting from a
// restricted thread of the reaper costs before any rule (floor-cost-%
// against wrapped).
//
// Each iteration is one round. The four configurations each run in a
// child process of their own (sandboxSessionsArg), with two runners and
// their own reapers, and take turns of a few sessions, one configuration
// at a time in a rotating order, until each has run its share: turns of
// milliseconds, so that a machine whose speed drifts (a shared VM's does,
// by tens of percent within seconds) slows them all alike. Each child
// reports the CPU of its sessions (itself and every process it reaped,
// once its reapers have exited). The metrics are medians over the rounds
// (-benchtime Nx).
func BenchmarkSandboxCost(b *testing.B) {
	const sessions, turn = 200, 10
	if ABI := SandboxABI(&Config{Sandbox: SandboxLandlock}); ABI < 1 {
		b.Skip("no Landlock on this kernel")
	}
	plugin, reaper := buildBinaries(b, b.TempDir())
	cfg := &Config{Sandbox: SandboxLandlock, WorktreeRoot: b.TempDir(), RuntimeRoot: b.TempDir()}
	sb, excluding := sandboxConfig("sandboxed", cfg), sandboxConfig("excluding", cfg)
	if len(excluding.current().Readable()) == 0 {
		b.Fatal("no shared read layer")
	}
	rounds := newRounds()
	for i := 0; i < b.N; i++ {
		report := rounds.next()
		got := takeTurns(b, i, plugin, reaper, sessions, turn)
		wrapped, boxed, excl, least := got[0], got[1], got[2], got[3]
		report(wrapped, "wrapped-session-cpu-ms")
		report(boxed, "sandboxed-session-cpu-ms")
		report(excl, "excluding-session-cpu-ms")
		report(least, "floor-session-cpu-ms")
		report(100*(least-wrapped)/wrapped, "floor-cost-%")
		report(100*(boxed-wrapped)/wrapped, "sandbox-cost-%")
		report(100*(excl-wrapped)/wrapped, "excluding-cost-%")
		report(1000*(boxed-wrapped), "sandbox-cost-us")
		report(1000*(excl-wrapped), "excluding-cost-us")
		report(restrictCPU(b, sb, sessions), "restrict-cpu-us")
		report(restrictCPU(b, excluding, sessions), "excluding-restrict-cpu-us")
		report(restrictCPU(b, nil, sessions), "thread-cpu-us")
		report(float64(len(sb.current().Rules())), "sandbox-rules")
		report(float64(len(excluding.current().Readable())), "readable-rules")
	}
	rounds.reportMedians(b)
}

// sandboxConfigs are BenchmarkSandboxCost's configurations, in the order
// of its metrics.
var sandboxConfigs = [4]string{"wrapped", "sandboxed", "excluding", "floor"}

// sandboxConfig makes the sandbox rules of one configuration on c's roots:
// none (wrapped), the Worker's (sandboxed), the Worker's with its config
// in /etc (excluding: any /etc entry stands for the installed layout's
// /etc/agent-forge), or a Shared of one rule granting everything (floor,
// which watches nothing).
func sandboxConfig(name string, c *Config) *sandboxRules {
	switch name {
	case "sandboxed":
		return newSandboxRules(c)
	case "excluding":
		cc := *c
		cc.ConfigPath = "/etc/hostname"
		return newSandboxRules(&cc)
	case "floor":
		everything, err := sandbox.NewShared([]sandbox.Rule{{Path: "/", Access: sandbox.ReadWrite}}, nil, "")
		if err != nil {
			panic(err)
		}
		return &sandboxRules{shared: everything}
	}
	return nil
}

// takeTurns runs one round of BenchmarkSandboxCost: n sessions of each
// configuration, each in its own child process, in turns of turn
// sessions; it returns their CPU milliseconds per session, in
// sandboxConfigs' order.
func takeTurns(b *testing.B, round int, plugin, reaper string, n, turn int) [4]float64 {
	b.Helper()
	type child struct {
		cmd  *exec.Cmd
		in   io.WriteCloser
		out  *bufio.Reader
		done bytes.Buffer
	}
	var cs [4]*child
	for j := range cs {
		c := &child{cmd: exec.Command(os.Args[0], sandboxSessionsArg, sandboxConfigs[j], plugin, reaper, b.TempDir(), b.TempDir())}
		c.cmd.Stderr = os.Stderr
		in, err := c.cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		c.in, c.out = in, bufio.NewReader(out)
		cs[j] = c
	}
	for t := 0; t*turn < n; t++ {
		for k := range 4 {
			c := cs[(round+t+k)%4] // who goes first rotates
			if _, err := fmt.Fprintln(c.in, turn); err != nil {
				b.Fatal(err)
			}
			if line, err := c.out.ReadString('\n'); err != nil || line != "ok\n" {
				b.Fatalf("turn: %q %v", line, err)
			}
		}
	}
	var got [4]float64
	for j, c := range cs {
		c.in.Close()
		line, err := c.out.ReadString('\n')
		if err == nil {
			got[j], err = strconv.ParseFloat(strings.TrimSpace(line), 64)
		}
		if err != nil {
			b.Fatalf("%s sessions: %q %v", sandboxConfigs[j], line, err)
		}
		if err := c.cmd.Wait(); err != nil {
			b.Fatalf("%s sessions: %v", sandboxConfigs[j], err)
		}
	}
	return got
}

// sandboxSessionsArg switches the test binary into one configuration of a
// BenchmarkSandboxCost round (arguments: configuration, plugin, reaper
// binary, worktree root, runtime root). Each line read from stdin is a
// number of sessions to run now, with two runners under its own reapers,
// answered "ok"; at EOF it stops its reapers and prints the CPU
// milliseconds per session of all its sessions (this process and every
// process it reaped, from before the first session until its reapers
// have exited).
const sandboxSessionsArg = "__worker_test_sandbox_sessions"

func sandboxSessions(args []string) int {
	if len(args) != 5 {
		return 2
	}
	sb := sandboxConfig(args[0], &Config{Sandbox: SandboxLandlock, WorktreeRoot: args[3], RuntimeRoot: args[4]})
	start := processCPU()
	reapers := supervise.NewReaperPool(args[2])
	if sb != nil {
		// Contained as the Worker contains them: a cgroup per sandboxed
		// start, below one made for these sessions (as root, or in a
		// cgroup delegated to the account), its making counted.
		own, err := supervise.OwnCgroup()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dir := filepath.Join(own, "forge-bench-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "a cgroup for the contained sessions (root, or a delegated cgroup):", err)
			return 1
		}
		defer os.Remove(dir)
		cg, err := supervise.NewCgroups(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cg.Close()
		reapers.Contain(cg)
	}
	total := 0
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		k, err := strconv.Atoi(in.Text())
		if err != nil || k < 1 {
			return 2
		}
		if err := runSessions(args[1], reapers, sb, args[3], 2, k); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		total += k
		fmt.Println("ok")
	}
	reapers.Close()
	if total == 0 {
		return 2
	}
	fmt.Println(float64((processCPU() - start).Microseconds()) / float64(total) / 1000)
	return 0
}

// restrictCPU is the CPU microseconds of one sandboxed start's own work in
// the reaper, without the program: a fresh locked thread restricted with
// a policy sb makes (the shared layer kept, as a reaper keeps it); nil
// measures the bare thread.
func restrictCPU(b *testing.B, sb *sandboxRules, n int) float64 {
	b.Helper()
	dir := b.TempDir()
	var layers sandbox.Cache
	defer layers.Close()
	start := processCPU()
	for range n {
		p := sb.policy(sandboxDirs{rw: []string{dir}})
		errs := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if p == nil {
				errs <- nil
				return
			}
			// As a reaper does: the program opened, its rule on that file.
			prog, err := sandbox.OpenProgram("/bin/sh")
			if err != nil {
				errs <- err
				return
			}
			defer prog.Close()
			p.Program = prog
			_, err = sandbox.RestrictThread(p, &layers)
			errs <- err
		}()
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	return float64((processCPU() - start).Microseconds()) / float64(n)
}
