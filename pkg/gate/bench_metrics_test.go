package gate

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/metrics"
)

// BenchmarkMetricsScrape: one GET /metrics of a Gate whose store holds
// 100,000 jobs, through HTTP and the strict parse's counterpart (the
// Gate's own Encode check). Two stores: "finished" (99,000 jobs run to
// success by 32 lanes, then 1,000 queued with the lanes gone: a store
// with a long history) and "queued" (100,000 jobs waiting: the worst
// case, as the queue gauges read one index entry and one row per
// waiting job), against "empty" (no job). Setup (the jobs) is not timed.
func BenchmarkMetricsScrape(b *testing.B) {
	b.Run("empty", func(b *testing.B) {
		tg := benchGate(b, 1)
		scrapeBench(b, tg, ownerClient(1), "empty", 0)
	})
	b.Run("finished", func(b *testing.B) {
		tg := benchGate(b, 32)
		client := ownerClient(32)
		var done atomic.Int64
		var lanes []*benchLane
		for i := 0; i < 32; i++ {
			l := openBenchLane(b, tg.addr, i)
			lanes = append(lanes, l)
			go l.serve(&done)
		}
		submitAll(b, client, tg.addr, 32, 99000)
		limit := time.Now().Add(10 * time.Minute)
		for done.Load() < 99000 {
			if time.Now().After(limit) {
				b.Fatalf("only %d jobs done", done.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, l := range lanes {
			l.ws.Close()
		}
		waitNoLanes(b, tg)
		submitAll(b, client, tg.addr, 32, 1000)
		scrapeBench(b, tg, client, "finished", 1000)
	})
	b.Run("queued", func(b *testing.B) {
		tg := benchGate(b, 1)
		client := ownerClient(32)
		submitAll(b, client, tg.addr, 32, 100000)
		scrapeBench(b, tg, client, "queued", 100000)
	})
}

func waitNoLanes(b *testing.B, tg *testGate) {
	limit := time.Now().Add(time.Minute)
	for len(tg.g.lanes.connectedByPool()) > 0 {
		if time.Now().After(limit) {
			b.Fatal("lanes still connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scrapeBench times scrapes and checks the first one's queue depth; it
// reports the process's CPU per scrape (the Gate and the HTTP client: on
// a shared machine a steadier figure than the wall time).
func scrapeBench(b *testing.B, tg *testGate, client *http.Client, name string, queued float64) {
	b.Run("scrape", func(b *testing.B) {
		var size int
		var parse time.Duration
		cpu0 := processCPU()
		for i := 0; i < b.N; i++ {
			req, _ := http.NewRequest("GET", "http://"+tg.addr+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+testOwnerToken)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("scrape: %d %v", resp.StatusCode, err)
			}
			if i == 0 {
				b.StopTimer()
				p0 := processCPU()
				fams, err := metrics.Parse(body)
				if err != nil {
					b.Fatal(err)
				}
				if got := series(b, fams, "forge_queue_depth", "pool=coding"); got != queued {
					b.Fatalf("%s: queue depth %v, want %v", name, got, queued)
				}
				parse = processCPU() - p0
				b.StartTimer()
			}
			size = len(body)
		}
		b.ReportMetric(float64(size), "bytes/scrape")
		// Gate and HTTP client together, the first scrape's check left out.
		b.ReportMetric(float64((processCPU()-cpu0-parse).Microseconds())/float64(b.N), "cpu_us/scrape")
	})
}
