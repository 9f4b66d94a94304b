package host_test

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/plugin"
	"github.com/0k-lab/agent-forge/pkg/plugin/host"
	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// cpuTimes returns the CPU time (user+system) of this process and of all
// its reaped children so far.
func cpuTimes(b *testing.B) (self, children time.Duration) {
	b.Helper()
	get := func(who int) time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return get(syscall.RUSAGE_SELF), get(syscall.RUSAGE_CHILDREN)
}

// measureCPU runs op b.N times and reports CPU milliseconds per operation
// split into this (host) process and the reaped children (the plugin).
func measureCPU(b *testing.B, op func() error) {
	b.Helper()
	b.ResetTimer()
	self0, child0 := cpuTimes(b)
	for i := 0; i < b.N; i++ {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	self1, child1 := cpuTimes(b)
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
	b.ReportMetric(per(self1-self0), "host-cpu-ms")
	b.ReportMetric(per(child1-child0), "child-cpu-ms")
	b.ReportMetric(per(self1-self0+child1-child0), "cpu-ms")
}

// The CPU benchmarks split the CPU time per operation between this process
// (host-cpu-ms: the runner, supervise, os/exec) and the reaped children
// (child-cpu-ms: the plugin), for a bare spawn-and-wait of the reference
// plugin with empty stdin, the same bare run through pkg/supervise, and a
// complete text session without the wrapper. The figures are means over
// b.N operations; run with e.g. -benchtime 400x and compare medians of
// several runs, as other load on the machine shows in them.
func BenchmarkCPUSpawnRefPlugin(b *testing.B) {
	measureCPU(b, func() error {
		cmd := exec.Command(built.refPlugin)
		cmd.Env = []string{}
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); ok {
			return nil
		}
		return err
	})
}

func BenchmarkCPUSessionPlain(b *testing.B) {
	cmd := host.Command{Path: built.refPlugin, Env: []string{}, OutputBytes: 1 << 20}
	req := host.Request{Offer: []plugin.Capability{plugin.CapText, plugin.CapProgress, plugin.CapCancel}, Operation: plugin.OpText, Input: "benchmark input"}
	measureCPU(b, func() error {
		_, err := host.Run(context.Background(), cmd, req, nil)
		return err
	})
}

// The same bare run (empty stdin) through pkg/supervise instead of os/exec:
// what the supervision itself (pipes, budget, reaping) costs.
func BenchmarkCPUSuperviseRefPlugin(b *testing.B) {
	cmd := supervise.Command{Path: built.refPlugin, Env: []string{}, OutputLimit: 1 << 20}
	measureCPU(b, func() error {
		_, err := supervise.Run(context.Background(), cmd, nil)
		return err
	})
}
