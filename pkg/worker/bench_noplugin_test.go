package worker

import (
	"testing"

	"github.com/0k-lab/agent-forge/pkg/supervise"
)

// BenchmarkEndToEndNoPlugin is the no-plugin phase of BenchmarkEndToEndText
// on its own, for quick profiling (-cpuprofile) of what Gate and Worker
// spend per text job: a real Gate (SQLite file) and a Worker with 2 lanes
// whose executor answers at once. The live variant submits while the
// Worker runs (as in BenchmarkEndToEndText, so the submits' HTTP cost is
// included, client side too); backlog submits every job before the Worker
// starts, leaving the lane cycle (lease, result, commit, next lease) alone;
// external submits like live but from a child process whose CPU is taken
// out, so cpu-ms/job is the Gate and the Worker alone. Metrics per
// variant: jobs/s, cpu-ms/job (this process) and commits/job (store group
// commits).
func BenchmarkEndToEndNoPlugin(b *testing.B) {
	instant := func(*Config, *supervise.ReaperPool) Executor { return instantExec{} }
	for _, v := range []struct {
		name string
		how  submission
	}{{"live", submitLive}, {"backlog", submitBacklog}, {"external", submitExternal}} {
		b.Run(v.name, func(b *testing.B) {
			const jobs = 400
			var p phase
			for i := 0; i < b.N; i++ {
				q, failed := endToEndRate(b, "/bin/true", "", "", instant, jobs, v.how)
				if failed != 0 {
					b.Fatalf("%d attempts failed", failed)
				}
				p.rate += q.rate / float64(b.N)
				p.cpuMS += q.cpuMS / float64(b.N)
				p.commits += q.commits / float64(b.N)
			}
			b.ReportMetric(p.rate, "jobs/s")
			b.ReportMetric(p.cpuMS, "cpu-ms/job")
			b.ReportMetric(p.commits, "commits/job")
		})
	}
}
