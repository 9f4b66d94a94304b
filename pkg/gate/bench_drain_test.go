package gate

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDrainQueued (e): N no-op text jobs are queued with no lane
// connected; then L raw lanes connect and drain them. Reported: jobs/s
// from the first lane's connect to the last result ACK, and the CPU of
// the whole process (Gate and lanes) per job. The figure to compare is
// the rate at many lanes against the rate at 8 (dispatch must not slow
// down with the number of idle lanes it chooses from).
func BenchmarkDrainQueued(b *testing.B) {
	for _, lanes := range []int{8, 256} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			drainQueued(b, lanes, 5000*b.N)
		})
	}
}

func drainQueued(b *testing.B, lanes, total int) {
	tg := benchGate(b, lanes)
	client := ownerClient(16)
	for i := 0; i < total; i++ {
		benchSubmit(b, client, tg.addr)
	}
	var done atomic.Int64
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	for i := 0; i < lanes; i++ {
		l := openBenchLane(b, tg.addr, i)
		go l.serve(&done)
	}
	limit := time.Now().Add(5 * time.Minute)
	for done.Load() < int64(total) {
		if time.Now().After(limit) {
			b.Fatalf("only %d of %d jobs drained", done.Load(), total)
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(total)/el.Seconds(), "jobs_per_s")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(total)/1000, "cpu_ms_per_job")
}
