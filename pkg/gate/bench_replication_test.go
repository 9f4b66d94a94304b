package gate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/store"
)

// BenchmarkGateProcessReplication: the cost of replication (DECISIONS 20)
// on the submit path, forge-gate as a process with its database
// replicated by a real Litestream to a file replica on the same disk. A
// round per mode (off, async, sync), alternated, BENCH_GATE_ROUNDS times
// (default 3); the figures are the medians per mode:
//   - p50_ms, p99_ms: one client submitting BENCH_GATE_SAMPLES (default
//     300) text jobs one after another, request to 201;
//   - jobs/s: 16 clients submitting BENCH_GATE_JOBS (default 3000) jobs.
//
// Nothing leases the jobs: only the acknowledged write is measured.
func BenchmarkGateProcessReplication(b *testing.B) {
	ls, err := exec.LookPath("litestream")
	if err != nil {
		b.Skip("litestream is not installed (.ci/run installs it)")
	}
	bin := builtGate(b)
	samples := envInt(b, "BENCH_GATE_SAMPLES", 300)
	total := envInt(b, "BENCH_GATE_JOBS", 3000)
	rounds := envInt(b, "BENCH_GATE_ROUNDS", 3)
	modes := []string{store.ReplicationOff, store.ReplicationAsync, store.ReplicationSync}
	got := map[string][]roundFigures{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for _, mode := range modes {
				got[mode] = append(got[mode], replicationRound(b, bin, ls, mode, samples, total))
			}
		}
	}
	b.StopTimer()
	for _, mode := range modes {
		reportMedians(b, mode, mode, got[mode])
	}
}

func replicationRound(b *testing.B, bin, ls, mode string, samples, total int) roundFigures {
	dir := b.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "litestream.sock")
	if mode != store.ReplicationOff {
		cfg := filepath.Join(dir, "litestream.yml")
		os.WriteFile(cfg, []byte(fmt.Sprintf("socket:\n  enabled: true\n  path: %s\n  permissions: 0600\ndbs:\n  - path: %s\n    replica:\n      type: file\n      path: %s\n",
			sock, filepath.Join(dir, "state", "forge.db"), filepath.Join(dir, "replica"))), 0o600)
		cmd := exec.Command(ls, "replicate", "-config", cfg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}()
		for deadline := time.Now().Add(waitLimit); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(sock); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("litestream's control socket did not appear")
			}
		}
	}
	p := startGateProcessIn(b, bin, 1, dir, func(m map[string]any) {
		m["replication"] = mode
		if mode != store.ReplicationOff {
			m["replication_socket"] = sock
		}
	})
	client := ownerClient(16)
	lat := make([]time.Duration, 0, samples)
	for i := 0; i < samples; i++ {
		start := time.Now()
		benchSubmit(b, client, p.addr)
		lat = append(lat, time.Since(start))
	}
	start := time.Now()
	submitAll(b, client, p.addr, 16, total)
	el := time.Since(start)
	client.CloseIdleConnections()
	p.stop(b)
	slices.Sort(lat)
	return roundFigures{
		"p50_ms": float64(percentile(lat, 0.50).Microseconds()) / 1000,
		"p99_ms": float64(percentile(lat, 0.99).Microseconds()) / 1000,
		"jobs/s": float64(total) / el.Seconds(),
	}
}
