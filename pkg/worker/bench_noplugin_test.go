package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// BenchmarkEndToEndNoPlugin is the no-plugin phase of BenchmarkEndToEndText
// on its own, for quick profiling of what Gate and Worker spend per text
// job: a real Gate (SQLite file) and a Worker with 2 lanes whose executor
// answers at once. The live variant submits while the Worker runs (as in
// BenchmarkEndToEndText, so the submits' HTTP cost is included); backlog
// submits every job before the Worker starts, leaving the lane cycle
// (lease, result, commit, next lease) alone. Metrics per variant: jobs/s,
// cpu-ms/job (this process) and commits/job (store group commits).
func BenchmarkEndToEndNoPlugin(b *testing.B) {
	for _, backlog := range []bool{false, true} {
		name := "live"
		if backlog {
			name = "backlog"
		}
		b.Run(name, func(b *testing.B) {
			const jobs = 400
			var p phase
			var commits float64
			for i := 0; i < b.N; i++ {
				q, c := noPluginRate(b, jobs, backlog)
				p.rate += q.rate / float64(b.N)
				p.cpuMS += q.cpuMS / float64(b.N)
				commits += c / float64(b.N)
			}
			b.ReportMetric(p.rate, "jobs/s")
			b.ReportMetric(p.cpuMS, "cpu-ms/job")
			b.ReportMetric(commits, "commits/job")
		})
	}
}

// noPluginRate runs n jobs through a real Gate and a 2-lane Worker with
// instantExec and returns the phase and the store commits per job.
func noPluginRate(b *testing.B, n int, backlog bool) (phase, float64) {
	b.Helper()
	dir := b.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		b.Fatal(err)
	}
	rg := startRealGate(b, gateJSON(filepath.Join(state, "forge.db"), 2, "30s", "1s", 3, "reference"), "")
	defer rg.stop()
	c := &Config{
		GateURL: rg.url(), ID: "worker-1", TokenEnv: "WTOKEN", HeartbeatInterval: 10 * time.Second, Concurrency: 2,
		WorktreeRoot: filepath.Join(dir, "wt"), RuntimeRoot: filepath.Join(dir, "rt"),
		Plugins:              []Plugin{{ID: "reference", Argv: []string{"/bin/true"}}},
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
		Executors: map[wire.Kind]Executor{wire.KindText: instantExec{}},
		Observe: func(e Event) {
			var ch chan Event
			switch e.Kind {
			case EventReported:
				ch = reported
			case EventConnected:
				ch = connected
			}
			select {
			case ch <- e:
			default:
			}
		}})
	if backlog {
		for i := 0; i < n; i++ {
			rg.submit("benchmark input")
		}
	}
	commits0 := rg.st.Stats().Commits
	start, cpu0 := time.Now(), processCPU()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if !backlog {
		<-connected
		<-connected
		commits0 = rg.st.Stats().Commits
		start, cpu0 = time.Now(), processCPU()
		go func() {
			for i := 0; i < n; i++ {
				if err := postJob(rg.addr, "benchmark input"); err != nil {
					reported <- Event{Kind: EventReported, Code: "submit_failed"}
				}
			}
		}()
	}
	stopProfile := profileMeasured(b)
	for i := 0; i < n; i++ {
		if e := <-reported; e.Code != "" {
			b.Fatalf("attempt failed: %s", e.Code)
		}
	}
	stopProfile()
	p := phase{
		rate:  float64(n) / time.Since(start).Seconds(),
		cpuMS: float64((processCPU() - cpu0).Microseconds()) / float64(n) / 1000,
	}
	return p, float64(rg.st.Stats().Commits-commits0) / float64(n)
}

// profiled numbers the measured phases profiled in this process.
var profiled atomic.Int32

// profileMeasured writes a CPU profile of the measured phase only (not
// the Gate's startup or a backlog's submits) to $NOPLUGIN_CPUPROFILE.N
// when that variable is set; go test's -cpuprofile must then be unset.
func profileMeasured(b *testing.B) (stop func()) {
	base := os.Getenv("NOPLUGIN_CPUPROFILE")
	if base == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", base, profiled.Add(1)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
