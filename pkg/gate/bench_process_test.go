package gate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The process benchmarks run the production forge-gate binary as a child
// process and measure it from outside: the load generator (submitters and
// raw lanes) runs in this test process, so only the Gate's own CPU is
// counted, read from /proc/<pid>/stat around the measured window.
//
// Rounds: BENCH_GATE_ROUNDS (default 3) rounds per binary, alternated.
// Jobs: BENCH_GATE_JOBS per lifecycle round (default 5000).
// Profile: BENCH_GATE_PERF=out.data records the first lifecycle round's
// Gate with perf (inspect with `perf report -i out.data --no-children`).
// Binaries: BENCH_GATE_BINS="name=path,name=path" compares several builds
// (for example main and a branch) in the same run, round by round; by
// default the binary built from this tree is measured alone. Figures are
// the medians over the rounds, reported per binary name.

var gateBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// builtGate builds ./cmd/forge-gate once per test binary.
func builtGate(b *testing.B) string {
	b.Helper()
	gateBin.once.Do(func() {
		gateBin.dir, gateBin.err = os.MkdirTemp("", "forge-gate-bench-")
		if gateBin.err != nil {
			return
		}
		gateBin.path = filepath.Join(gateBin.dir, "forge-gate")
		cmd := exec.Command("go", "build", "-o", gateBin.path, "../../cmd/forge-gate")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			gateBin.err = fmt.Errorf("build forge-gate: %v\n%s", err, out)
		}
	})
	if gateBin.err != nil {
		b.Fatal(gateBin.err)
	}
	return gateBin.path
}

func removeBuiltGate() {
	if gateBin.dir != "" {
		os.RemoveAll(gateBin.dir)
	}
}

type benchBinary struct{ name, path string }

func benchBinaries(b *testing.B) []benchBinary {
	spec := os.Getenv("BENCH_GATE_BINS")
	if spec == "" {
		return []benchBinary{{"this", builtGate(b)}}
	}
	var out []benchBinary
	for _, kv := range strings.Split(spec, ",") {
		name, path, ok := strings.Cut(kv, "=")
		if !ok || name == "" || path == "" {
			b.Fatalf("BENCH_GATE_BINS: want name=path, got %q", kv)
		}
		out = append(out, benchBinary{name, path})
	}
	return out
}

func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s: want a positive integer", key)
	}
	return n
}

// gateProc is a running forge-gate child.
type gateProc struct {
	cmd  *exec.Cmd
	addr string
	// stopped receives the final store counters from the Gate's shutdown
	// log line.
	stopped chan map[string]any
}

func startGateProcess(b *testing.B, bin string, lanes int) *gateProc {
	b.Helper()
	return startGateProcessIn(b, bin, lanes, b.TempDir(), nil)
}

// startGateProcessIn starts forge-gate with its database in dir/state,
// after more changes its gate.json.
func startGateProcessIn(b *testing.B, bin string, lanes int, dir string, more func(m map[string]any)) *gateProc {
	b.Helper()
	data := edit(b, func(m map[string]any) {
		m["listen"] = "127.0.0.1:0"
		m["database"] = filepath.Join(dir, "state", "forge.db")
		m["recovery_interval"] = "1s"
		m["lease_poll_interval"] = "100ms"
		m["lifecycle"] = map[string]any{"lease_ttl": "30s", "retry_base": "1s", "max_attempts": 3}
		worker0(m)["concurrency"] = lanes
		if more != nil {
			more(m)
		}
	})
	cfg := filepath.Join(dir, "gate.json")
	if err := os.WriteFile(cfg, data, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "FORGE_OWNER_TOKEN=" + testOwnerToken, "FORGE_WORKER_TOKEN=" + benchWorkerToken}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &gateProc{cmd: cmd, stopped: make(chan map[string]any, 1)}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e map[string]any
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			switch e["msg"] {
			case "listening":
				a, _ := e["addr"].(string)
				listening <- a
			case "store counters":
				p.stopped <- e
			}
		}
	}()
	b.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	select {
	case p.addr = <-listening:
	case <-time.After(waitLimit):
		b.Fatal("forge-gate never logged its address")
	}
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := http.Get("http://" + p.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("forge-gate never became ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}

// cpu returns the user+system CPU the Gate process has used so far.
func (p *gateProc) cpu(b *testing.B) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the line, in USER_HZ (100) ticks.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse /proc stat: %q", s)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// perf starts `perf record` on the Gate when BENCH_GATE_PERF names an
// output file that does not exist yet (so only the first round is
// profiled); the returned function stops it.
func (p *gateProc) perf(b *testing.B) func() {
	b.Helper()
	out := os.Getenv("BENCH_GATE_PERF")
	if out == "" {
		return func() {}
	}
	if _, err := os.Stat(out); err == nil {
		return func() {}
	}
	cmd := exec.Command("perf", "record", "-q", "-F", "997", "-g", "-o", out, "-p", strconv.Itoa(p.cmd.Process.Pid))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("perf: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // let it attach
	return func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}
}

// stop ends the Gate with SIGTERM and returns its commit count and its
// whole-life CPU from wait4.
func (p *gateProc) stop(b *testing.B) (commits int64, cpu time.Duration) {
	b.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		b.Fatalf("forge-gate exit: %v", err)
	}
	select {
	case e := <-p.stopped:
		c, _ := e["commits"].(float64)
		commits = int64(c)
	case <-time.After(waitLimit):
		b.Fatal("forge-gate logged no store counters")
	}
	return commits, p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

type roundFigures map[string]float64

// runRounds runs rounds of each binary alternately and reports, per binary,
// the median of every figure.
func runRounds(b *testing.B, round func(b *testing.B, bin string) roundFigures) {
	bins := benchBinaries(b)
	rounds := envInt(b, "BENCH_GATE_ROUNDS", 3)
	got := map[string][]roundFigures{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for _, bin := range bins {
				got[bin.name] = append(got[bin.name], round(b, bin.path))
			}
		}
	}
	b.StopTimer()
	for _, bin := range bins {
		name := ""
		if len(bins) > 1 {
			name = bin.name
		}
		reportMedians(b, bin.name, name, got[bin.name])
	}
}

// reportMedians reports the median of every figure of rounds rs (as
// prefix:figure when prefix is set) and logs each figure's rounds under
// label.
func reportMedians(b *testing.B, label, prefix string, rs []roundFigures) {
	keys := make([]string, 0, len(rs[0]))
	for k := range rs[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var line []string
	for _, k := range keys {
		vals := make([]float64, len(rs))
		for i, r := range rs {
			vals[i] = r[k]
		}
		slices.Sort(vals)
		med := vals[len(vals)/2]
		if len(vals)%2 == 0 {
			med = (vals[len(vals)/2-1] + vals[len(vals)/2]) / 2
		}
		name := k
		if prefix != "" {
			name = prefix + ":" + k
		}
		b.ReportMetric(med, name)
		line = append(line, fmt.Sprintf("%s=%.4g%v", k, med, vals))
	}
	b.Logf("%s (%d rounds): %s", label, len(rs), strings.Join(line, " "))
}

// BenchmarkGateProcessLifecycle: no-op text jobs submitted over HTTP by S
// submitters, leased to L raw lanes that answer each with a result; from
// the first submit to the last result ACK. gate-µs/job is the Gate
// process's CPU in that window.
func BenchmarkGateProcessLifecycle(b *testing.B) {
	for _, c := range []struct{ submitters, lanes int }{{16, 8}, {64, 32}} {
		b.Run(fmt.Sprintf("submitters=%d/lanes=%d", c.submitters, c.lanes), func(b *testing.B) {
			total := envInt(b, "BENCH_GATE_JOBS", 5000)
			runRounds(b, func(b *testing.B, bin string) roundFigures {
				return processLifecycle(b, bin, c.submitters, c.lanes, total)
			})
		})
	}
}

func processLifecycle(b *testing.B, bin string, submitters, lanes, total int) roundFigures {
	p := startGateProcess(b, bin, lanes)
	var done atomic.Int64
	ls := make([]*benchLane, lanes)
	for i := range ls {
		ls[i] = openBenchLane(b, p.addr, i)
		go ls[i].serve(&done)
	}
	client := ownerClient(submitters)
	stopPerf := p.perf(b)
	cpu0 := p.cpu(b)
	start := time.Now()
	submitAll(b, client, p.addr, submitters, total)
	limit := time.Now().Add(2 * time.Minute)
	for done.Load() < int64(total) {
		if time.Now().After(limit) {
			b.Fatalf("only %d of %d jobs finished", done.Load(), total)
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	cpu := p.cpu(b) - cpu0
	stopPerf()
	for _, l := range ls {
		l.ws.Close()
	}
	client.CloseIdleConnections()
	commits, _ := p.stop(b)
	return roundFigures{
		"jobs/s":      float64(total) / el.Seconds(),
		"gate-µs/job": float64(cpu.Microseconds()) / float64(total),
		// Commits over the Gate's whole life; startup adds a handful.
		"commits/s":   float64(commits) / el.Seconds(),
		"jobs/commit": float64(total) / float64(max(commits, 1)),
	}
}

// BenchmarkGateProcessIdleLatency: 8 idle connected lanes, one job
// submitted every 5 ms; latency from the start of the submit request to the
// lease arriving at a lane.
func BenchmarkGateProcessIdleLatency(b *testing.B) {
	samples := envInt(b, "BENCH_GATE_SAMPLES", 1000)
	runRounds(b, func(b *testing.B, bin string) roundFigures {
		const lanes = 8
		p := startGateProcess(b, bin, lanes)
		var done atomic.Int64
		leases := make(chan time.Time, lanes)
		ls := make([]*benchLane, lanes)
		for i := range ls {
			ls[i] = openBenchLane(b, p.addr, i)
			ls[i].leases = leases
			go ls[i].serve(&done)
		}
		client := ownerClient(4)
		lat := make([]time.Duration, 0, samples)
		tick := time.NewTicker(5 * time.Millisecond)
		for i := 0; i < samples; i++ {
			<-tick.C
			start := time.Now()
			go benchSubmit(b, client, p.addr)
			select {
			case at := <-leases:
				lat = append(lat, at.Sub(start))
			case <-time.After(waitLimit):
				b.Fatal("no lease")
			}
		}
		tick.Stop()
		for _, l := range ls {
			l.ws.Close()
		}
		client.CloseIdleConnections()
		p.stop(b)
		slices.Sort(lat)
		return roundFigures{
			"p50_ms": float64(percentile(lat, 0.50).Microseconds()) / 1000,
			"p99_ms": float64(percentile(lat, 0.99).Microseconds()) / 1000,
		}
	})
}
