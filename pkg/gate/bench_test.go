package gate

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
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
	"golang.org/x/net/websocket"
)

// Benchmarks run a real Gate on a file database (WAL, synchronous=FULL)
// with the load generator in-process over loopback. Each reports its own
// figures with b.ReportMetric; run them with -benchtime 1x.

const benchWorkerToken = "bench-worker-token-0001"

func benchGate(b *testing.B, concurrency int) *testGate {
	b.Helper()
	data := edit(b, func(m map[string]any) {
		m["recovery_interval"] = "1s"
		m["lease_poll_interval"] = "100ms"
		m["lifecycle"] = map[string]any{"lease_ttl": "30s", "retry_base": "1s", "max_attempts": 3}
		worker0(m)["concurrency"] = concurrency
	})
	env := defaultEnv()
	env["FORGE_WORKER_TOKEN"] = benchWorkerToken
	cfg, sec, err := LoadConfig(bytes.NewReader(data), testEnv(env))
	if err != nil {
		b.Fatal(err)
	}
	clk := &realClock{}
	st := startGateClock(b, cfg, sec, clk.Now)
	return st
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// ownerClient keeps enough idle connections for every submitter.
func ownerClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

// submitAll posts total jobs from submitters concurrent clients sharing
// client, and returns once all are answered.
func submitAll(b *testing.B, client *http.Client, addr string, submitters, total int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for s := 0; s < submitters; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) {
				benchSubmit(b, client, addr)
			}
		}()
	}
	wg.Wait()
}

func benchSubmit(b *testing.B, c *http.Client, addr string) {
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/jobs", bytes.NewReader([]byte(`{"input":"hello"}`)))
	req.Header.Set("Authorization", "Bearer "+testOwnerToken)
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Errorf("submit: %d", resp.StatusCode)
	}
}

// benchLane is a raw worker lane that answers every lease with a no-op
// result as fast as it can. It is a load generator sharing the machine
// with the Gate under test, so it speaks the protocol with plain
// encoding/json on the raw WebSocket (the Gate still decodes strictly) and
// reads only the fields it needs.
type benchLane struct {
	ws     *websocket.Conn
	leases chan time.Time // receive time of every lease
}

// benchMsg is the part of a Gate message the bench lane reads.
type benchMsg struct {
	Type  string `json:"type"`
	Seq   uint64 `json:"seq"`
	Lease *struct {
		JobID     string `json:"job_id"`
		AttemptID string `json:"attempt_id"`
	} `json:"lease"`
}

func openBenchLane(b *testing.B, addr string, slot int) *benchLane {
	b.Helper()
	cfg, err := websocket.NewConfig("ws://"+addr+wire.Path, "http://"+addr)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Header.Set("Authorization", "Bearer "+benchWorkerToken)
	ws, err := cfg.DialContext(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	hello := `{"type":"hello","hello":{"protocol":"` + wire.Protocol + `","worker_id":"worker-1","slot":` + strconv.Itoa(slot) +
		`,"plugins":["reference"],"repositories":[]}}`
	if err := websocket.Message.Send(ws, hello); err != nil {
		b.Fatal(err)
	}
	l := &benchLane{ws: ws, leases: make(chan time.Time, 1)}
	if m, err := l.receive(); err != nil || m.Type != "welcome" {
		b.Fatalf("welcome: %+v %v", m, err)
	}
	return l
}

func (l *benchLane) receive() (benchMsg, error) {
	var data []byte
	if err := websocket.Message.Receive(l.ws, &data); err != nil {
		return benchMsg{}, err
	}
	var m benchMsg
	err := json.Unmarshal(data, &m)
	return m, err
}

// serve answers leases until the connection closes: lease → result → ack.
func (l *benchLane) serve(done *atomic.Int64) {
	var seq uint64
	var buf []byte
	for {
		m, err := l.receive()
		if err != nil {
			return
		}
		if m.Lease == nil {
			continue
		}
		select {
		case l.leases <- time.Now():
		default:
		}
		seq++
		buf = append(buf[:0], `{"type":"result","seq":`...)
		buf = strconv.AppendUint(buf, seq, 10)
		buf = append(buf, `,"result":{"job_id":"`...)
		buf = append(buf, m.Lease.JobID...)
		buf = append(buf, `","attempt_id":"`...)
		buf = append(buf, m.Lease.AttemptID...)
		buf = append(buf, `","outcome":"succeeded","output":""}}`...)
		if err := websocket.Message.Send(l.ws, string(buf)); err != nil {
			return
		}
		ack, err := l.receive()
		if err != nil || ack.Type != "ack" || ack.Seq != seq {
			return
		}
		done.Add(1)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// BenchmarkSubmitToLeaseLatency (a): one idle connected lane, one job
// submitted every 5 ms; latency from the start of the submit request to
// the lease arriving at the lane.
func BenchmarkSubmitToLeaseLatency(b *testing.B) {
	tg := benchGate(b, 1)
	lane := openBenchLane(b, tg.addr, 0)
	var done atomic.Int64
	go lane.serve(&done)
	client := ownerClient(4)
	samples := 1000 * b.N
	lat := make([]time.Duration, 0, samples)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := 0; i < samples; i++ {
		<-tick.C
		start := time.Now()
		go benchSubmit(b, client, tg.addr)
		select {
		case at := <-lane.leases:
			lat = append(lat, at.Sub(start))
		case <-time.After(waitLimit):
			b.Fatal("no lease")
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max_ms")
}

// BenchmarkDurableSubmits (b): durable submits/s through the HTTP API with
// 16 concurrent submitters and no Worker connected.
func BenchmarkDurableSubmits(b *testing.B) {
	tg := benchGate(b, 1)
	const submitters = 16
	total := 5000 * b.N
	client := ownerClient(submitters)
	before := tg.st.Stats()
	cpu0 := processCPU()
	b.ResetTimer()
	start := time.Now()
	submitAll(b, client, tg.addr, submitters, total)
	el := time.Since(start)
	b.StopTimer()
	after := tg.st.Stats()
	commits := after.Commits - before.Commits
	b.ReportMetric(float64(total)/el.Seconds(), "submits_per_s")
	b.ReportMetric(float64(commits)/el.Seconds(), "commits_per_s")
	b.ReportMetric(float64(total)/float64(max(commits, 1)), "submits_per_commit")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(total)/1000, "cpu_ms_per_submit")
}

// BenchmarkEndToEnd (c): 20,000 no-op text jobs submitted over HTTP by S
// concurrent submitters, leased to L raw-worker lanes which return a
// result each; from the first submit to the last result ACK.
func BenchmarkEndToEnd(b *testing.B) {
	for _, c := range []struct{ submitters, lanes int }{{16, 8}, {64, 32}} {
		b.Run(fmt.Sprintf("submitters=%d/lanes=%d", c.submitters, c.lanes), func(b *testing.B) {
			endToEnd(b, c.submitters, c.lanes, 20000*b.N)
		})
	}
}

func endToEnd(b *testing.B, submitters, lanes, total int) {
	tg := benchGate(b, lanes)
	var done atomic.Int64
	for i := 0; i < lanes; i++ {
		l := openBenchLane(b, tg.addr, i)
		go l.serve(&done)
	}
	client := ownerClient(submitters)
	before := tg.st.Stats()
	cpu0 := processCPU()
	b.ResetTimer()
	start := time.Now()
	submitAll(b, client, tg.addr, submitters, total)
	submitted := time.Since(start)
	limit := time.Now().Add(2 * time.Minute)
	for done.Load() < int64(total) {
		if time.Now().After(limit) {
			b.Fatalf("only %d of %d jobs finished", done.Load(), total)
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	b.StopTimer()
	after := tg.st.Stats()
	commits := after.Commits - before.Commits
	b.ReportMetric(float64(total)/el.Seconds(), "jobs_per_s")
	b.ReportMetric(float64(total)/submitted.Seconds(), "submits_per_s")
	b.ReportMetric(float64(commits)/el.Seconds(), "commits_per_s")
	b.ReportMetric(float64(total)/float64(max(commits, 1)), "jobs_per_commit")
	b.ReportMetric(float64(after.Operations-before.Operations)/float64(total), "store_ops_per_job")
	b.ReportMetric(float64(after.Operations-before.Operations)/float64(max(commits, 1)), "ops_per_commit")
	// CPU of the whole process (Gate and load generator) per job: the
	// figure that does not depend on what else the machine runs.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(total)/1000, "cpu_ms_per_job")
}

// BenchmarkIdleLaneMemory (d): Gate memory per idle connected lane. The
// lanes are opened by a child process (this test binary in client mode, see
// TestMain) so that only the Gate's side is measured in this process.
func BenchmarkIdleLaneMemory(b *testing.B) {
	const n = 256
	tg := benchGate(b, n)
	var heap, stack [2]uint64
	measure := func(i int) uint64 {
		// Several cycles: each may halve an oversized goroutine stack, as
		// the ordinary GCs of a long-running Gate do.
		for range 4 {
			runtime.GC()
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		heap[i], stack[i] = m.HeapInuse, m.StackInuse
		return m.HeapInuse + m.StackInuse
	}
	before := measure(0)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), clientModeEnv+"="+tg.addr, clientLanesEnv+"="+strconv.Itoa(n))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		b.Fatalf("client: %q %v", line, err)
	}
	for {
		tg.g.lanes.mu.Lock()
		k := len(tg.g.lanes.order)
		idle := true
		for _, l := range tg.g.lanes.order {
			idle = idle && l.state == laneIdle
		}
		tg.g.lanes.mu.Unlock()
		if k == n && idle {
			break
		}
		time.Sleep(time.Millisecond)
	}
	after := measure(1)
	per := (float64(after) - float64(before)) / n
	b.ReportMetric(per/1024, "KiB_per_lane")
	b.ReportMetric((float64(heap[1])-float64(heap[0]))/n/1024, "heap_KiB_per_lane")
	b.ReportMetric((float64(stack[1])-float64(stack[0]))/n/1024, "stack_KiB_per_lane")
}

const (
	clientModeEnv  = "FORGE_GATE_TEST_LANE_CLIENT"
	clientLanesEnv = "FORGE_GATE_TEST_LANES"
)

// TestMain doubles as the idle-lane client of BenchmarkIdleLaneMemory when
// the parent sets clientModeEnv: it opens the lanes, says "ready", and
// holds them until stdin closes.
func TestMain(m *testing.M) {
	if addr := os.Getenv(clientModeEnv); addr != "" {
		os.Exit(laneClient(addr))
	}
	code := m.Run()
	removeBuiltGate()
	os.Exit(code)
}

func laneClient(addr string) int {
	n, err := strconv.Atoi(os.Getenv(clientLanesEnv))
	if err != nil || n < 1 || n > MaxConcurrency {
		return 2
	}
	conns := make([]*wire.Conn, 0, n)
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		c, err := wire.Dial(ctx, "ws://"+addr, benchWorkerToken)
		cancel()
		if err != nil {
			return 1
		}
		if err := c.Send(wire.Envelope{Type: wire.TypeHello, Hello: &wire.Hello{Protocol: wire.Protocol, WorkerID: "worker-1", Slot: i, Plugins: []string{"reference"}, Repositories: []string{}}}); err != nil {
			return 1
		}
		if e, err := c.Receive(); err != nil || e.Welcome == nil {
			return 1
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return 0
}
