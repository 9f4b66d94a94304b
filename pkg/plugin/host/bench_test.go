package host_test

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// The benchmarks report per-operation latency percentiles (p50-ms, p99-ms)
// besides the mean ns/op; run them with enough iterations to make p99
// meaningful, e.g. -benchtime 300x. Binaries come from TestMain.

// measure runs op b.N times and reports the latency distribution.
func measure(b *testing.B, op func() error) {
	b.Helper()
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(d)
	pct := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// (a) bare spawn-and-wait of the reference plugin with stdin closed (it
// reads EOF, writes nothing and exits nonzero).
func BenchmarkSpawnRefPlugin(b *testing.B) {
	measure(b, func() error {
		err := exec.Command(built.refPlugin).Run()
		if _, ok := err.(*exec.ExitError); ok {
			return nil
		}
		return err
	})
}

// (a) under the wrapper: the same bare spawn-and-wait with the reference
// plugin started by a long-lived child-subreaper wrapper from the pool.
// The difference to (a) is what the wrapper costs per invocation when
// nothing is left to clean up (its fast path): a few messages on a socket.
func BenchmarkSpawnWrappedRefPlugin(b *testing.B) {
	reapers := supervise.NewReaperPool(built.wrapper)
	defer reapers.Close()
	cmd := supervise.Command{Path: built.refPlugin, Env: []string{}, OutputLimit: 1 << 20, Reaper: reapers}
	measure(b, func() error {
		_, err := supervise.Run(context.Background(), cmd, nil)
		return err
	})
}

func benchSession(b *testing.B, reaper *supervise.ReaperPool) {
	cmd := host.Command{Path: built.refPlugin, Env: []string{}, OutputBytes: 1 << 20, Reaper: reaper}
	req := host.Request{Offer: []plugin.Capability{plugin.CapText}, Operation: plugin.OpText, Input: "hello, forge"}
	measure(b, func() error {
		out, err := host.Run(context.Background(), cmd, req, nil)
		if err == nil && out.Output != "HELLO, FORGE" {
			b.Fatalf("output %q", out.Output)
		}
		return err
	})
}

// (b) a complete text session through the runner, without the wrapper.
func BenchmarkSessionPlain(b *testing.B) { benchSession(b, nil) }

// (c) the same session under the Linux child-subreaper wrapper.
func BenchmarkSessionWrapped(b *testing.B) {
	reapers := supervise.NewReaperPool(built.wrapper)
	defer reapers.Close()
	benchSession(b, reapers)
}
