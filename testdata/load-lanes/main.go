// Command load-lanes is the load generator of scripts/load-e2e.sh: it
// opens many raw Worker lanes to a running Gate over real WebSockets on
// loopback, speaking forge-wire/v1 by hand (docs/wire-protocol.md; plain
// encoding/json on the client side, the Gate still decodes strictly), and
// measures the Gate from outside: its RSS and CPU from /proc/PID.
//
// Usage:
//
//	load-lanes -gate HOST:PORT -gate-pid PID -workers W -per L \
//	  [-latency K] [-drain N] [-dead=true]
//
// The Gate config must list Workers load-0 … load-(W-1), each with
// concurrency ≥ L (≤ 256), pool of the default text execution, plugin
// "reference", the token of load-i in $FORGE_LOAD_TOKEN_i; the owner token
// is in $FORGE_OWNER_TOKEN. Phases, in order:
//
//  1. W×L lanes connect and go idle: Gate RSS per idle lane.
//  2. K jobs submitted one at a time with every lane idle: submit→lease
//     latency (from the start of the POST to the lease arriving).
//  3. dead: the lane that gets the next job closes its connection at once
//     (a dead Worker); the time until the job is leased again elsewhere.
//  4. every lane disconnects; N jobs are queued; every lane reconnects and
//     they drain: jobs/s from the first reconnect to the last result ACK,
//     Gate CPU per job over that span, and the reconnect ramp.
//
// Every lane answers a lease at once with a succeeded result. Output: one
// JSON object on stdout. Exit 1 when a phase cannot finish within its
// bound (a safety net, not a figure).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/websocket"
)

type msg struct {
	Type  string `json:"type"`
	Seq   uint64 `json:"seq"`
	Lease *struct {
		JobID     string `json:"job_id"`
		AttemptID string `json:"attempt_id"`
	} `json:"lease"`
}

type leaseSeen struct {
	job string
	at  time.Time
}

type driver struct {
	gate     string
	owner    string
	leases   chan leaseSeen // every lease, when watched
	watch    atomic.Bool
	victim   atomic.Bool // the next lease kills its lane
	deadAt   atomic.Int64
	done     atomic.Int64
	lanesMu  sync.Mutex
	lanes    []*websocket.Conn
	welcomed atomic.Int64
}

func main() {
	out, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "load-lanes: error:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

func run() (map[string]any, error) {
	gate := flag.String("gate", "", "Gate host:port")
	gatePid := flag.Int("gate-pid", 0, "Gate process id (for /proc)")
	workers := flag.Int("workers", 1, "Worker ids load-0 … load-(W-1)")
	per := flag.Int("per", 8, "lanes per Worker (≤ 256)")
	latency := flag.Int("latency", 200, "latency samples")
	drain := flag.Int("drain", 1000, "jobs to queue and drain")
	dead := flag.Bool("dead", true, "measure the dead-Worker re-lease time")
	flag.Parse()
	if *gate == "" || *gatePid == 0 || *per < 1 || *per > 256 {
		return nil, errors.New("usage: load-lanes -gate HOST:PORT -gate-pid PID -workers W -per L [-latency K] [-drain N]")
	}
	d := &driver{gate: *gate, owner: os.Getenv("FORGE_OWNER_TOKEN"), leases: make(chan leaseSeen, 1024)}
	n := *workers * *per
	out := map[string]any{"lanes": n, "workers": *workers}

	rss0, _ := procRSS(*gatePid)
	start := time.Now()
	if err := d.connectAll(*workers, *per); err != nil {
		return nil, err
	}
	out["connect_s"] = time.Since(start).Seconds()
	time.Sleep(2 * time.Second) // let the Gate settle after the ramp
	rss1, _ := procRSS(*gatePid)
	out["gate_rss_idle_kib"] = rss1 / 1024
	out["gate_rss_base_kib"] = rss0 / 1024
	out["rss_per_idle_lane_kib"] = float64(rss1-rss0) / 1024 / float64(n)

	// 2. Latency with every lane idle.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}
	lat := make([]time.Duration, 0, *latency)
	d.watch.Store(true)
	for i := 0; i < *latency; i++ {
		before := d.done.Load()
		t0 := time.Now()
		id, err := d.submit(client)
		if err != nil {
			return nil, err
		}
		at, err := d.awaitLease(id, 30*time.Second)
		if err != nil {
			return nil, err
		}
		lat = append(lat, at.Sub(t0))
		if !waitFor(func() bool { return d.done.Load() > before }, 30*time.Second) {
			return nil, errors.New("a latency job was never acknowledged")
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		out["submit_to_lease_p50_ms"] = ms(lat[len(lat)/2])
		out["submit_to_lease_p99_ms"] = ms(lat[(len(lat)*99)/100])
		out["submit_to_lease_max_ms"] = ms(lat[len(lat)-1])
	}

	// 3. A dead Worker's job.
	if *dead {
		d.victim.Store(true)
		id, err := d.submit(client)
		if err != nil {
			return nil, err
		}
		if _, err := d.awaitLease(id, 30*time.Second); err != nil {
			return nil, err
		}
		again, err := d.awaitLease(id, 5*time.Minute)
		if err != nil {
			return nil, errors.New("the dead lane's job was never leased again")
		}
		out["dead_release_s"] = again.Sub(time.Unix(0, d.deadAt.Load())).Seconds()
	}
	d.watch.Store(false)

	// 4. Queue, then drain through reconnected lanes.
	d.closeAll()
	time.Sleep(time.Second)
	queued := time.Now()
	if err := d.submitMany(client, *drain, 16); err != nil {
		return nil, err
	}
	out["queue_submits_per_s"] = float64(*drain) / time.Since(queued).Seconds()
	before := d.done.Load()
	cpu0, _ := procCPU(*gatePid)
	d.welcomed.Store(0)
	t0 := time.Now()
	var ramp time.Duration
	go func() {
		_ = d.connectAll(*workers, *per)
		ramp = time.Since(t0)
	}()
	if !waitFor(func() bool { return d.done.Load()-before >= int64(*drain) }, 10*time.Minute) {
		return nil, fmt.Errorf("drained %d of %d jobs", d.done.Load()-before, *drain)
	}
	el := time.Since(t0)
	cpu1, _ := procCPU(*gatePid)
	out["drain_jobs"] = *drain
	out["drain_jobs_per_s"] = float64(*drain) / el.Seconds()
	out["gate_cpu_ms_per_job"] = ms(cpu1-cpu0) / float64(*drain)
	waitFor(func() bool { return ramp > 0 }, time.Minute)
	out["reconnect_s"] = ramp.Seconds()
	d.closeAll()
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func waitFor(f func() bool, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func (d *driver) awaitLease(id string, limit time.Duration) (time.Time, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case l := <-d.leases:
			if l.job == id {
				return l.at, nil
			}
		case <-timer.C:
			return time.Time{}, errors.New("no lease for job " + id)
		}
	}
}

func (d *driver) connectAll(workers, per int) error {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var first atomic.Value
	for w := 0; w < workers; w++ {
		tok := os.Getenv("FORGE_LOAD_TOKEN_" + strconv.Itoa(w))
		for s := 0; s < per; s++ {
			wg.Add(1)
			sem <- struct{}{}
			go func(w, s int) {
				defer wg.Done()
				defer func() { <-sem }()
				ws, err := d.open("load-"+strconv.Itoa(w), s, tok)
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
				go d.serve(ws)
			}(w, s)
		}
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return err
	}
	return nil
}

func (d *driver) open(worker string, slot int, token string) (*websocket.Conn, error) {
	cfg, err := websocket.NewConfig("ws://"+d.gate+"/v1/worker/connect", "http://"+d.gate)
	if err != nil {
		return nil, err
	}
	cfg.Header.Set("Authorization", "Bearer "+token)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial %s#%d: %w", worker, slot, err)
	}
	hello := `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"` + worker + `","slot":` + strconv.Itoa(slot) +
		`,"plugins":["reference"],"repositories":[]}}`
	if err := websocket.Message.Send(ws, hello); err != nil {
		ws.Close()
		return nil, err
	}
	var m msg
	if err := receive(ws, &m); err != nil || m.Type != "welcome" {
		ws.Close()
		return nil, fmt.Errorf("no welcome for %s#%d (%v)", worker, slot, err)
	}
	d.welcomed.Add(1)
	d.lanesMu.Lock()
	d.lanes = append(d.lanes, ws)
	d.lanesMu.Unlock()
	return ws, nil
}

func receive(ws *websocket.Conn, m *msg) error {
	var data []byte
	if err := websocket.Message.Receive(ws, &data); err != nil {
		return err
	}
	*m = msg{}
	return json.Unmarshal(data, m)
}

// serve answers every lease with a no-op result until the connection ends.
func (d *driver) serve(ws *websocket.Conn) {
	var seq uint64
	var buf []byte
	for {
		var m msg
		if err := receive(ws, &m); err != nil {
			return
		}
		if m.Lease == nil {
			continue
		}
		now := time.Now()
		if d.victim.CompareAndSwap(true, false) {
			d.deadAt.Store(time.Now().UnixNano())
			ws.Close()
			d.leases <- leaseSeen{m.Lease.JobID, now}
			return
		}
		if d.watch.Load() {
			d.leases <- leaseSeen{m.Lease.JobID, now}
		}
		seq++
		buf = append(buf[:0], `{"type":"result","seq":`...)
		buf = strconv.AppendUint(buf, seq, 10)
		buf = append(buf, `,"result":{"job_id":"`...)
		buf = append(buf, m.Lease.JobID...)
		buf = append(buf, `","attempt_id":"`...)
		buf = append(buf, m.Lease.AttemptID...)
		buf = append(buf, `","outcome":"succeeded","output":"OK"}}`...)
		if err := websocket.Message.Send(ws, string(buf)); err != nil {
			return
		}
		var ack msg
		if err := receive(ws, &ack); err != nil {
			return
		}
		if ack.Type != "ack" || ack.Seq != seq { // a lease never precedes the ack (wire-protocol.md)
			return
		}
		d.done.Add(1)
	}
}

func (d *driver) closeAll() {
	d.lanesMu.Lock()
	for _, ws := range d.lanes {
		ws.Close()
	}
	d.lanes = nil
	d.lanesMu.Unlock()
}

func (d *driver) submit(c *http.Client) (string, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+d.gate+"/v1/jobs", bytes.NewReader([]byte(`{"input":"load"}`)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+d.owner)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("submit: %d", resp.StatusCode)
	}
	var j struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &j); err != nil {
		return "", err
	}
	return j.ID, nil
}

func (d *driver) submitMany(c *http.Client, n, par int) error {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for i := 0; i < par; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := d.submit(c); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return err
	}
	return nil
}

// procRSS is the resident set of pid in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// procCPU is the user+system CPU time pid has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ = 100 on Linux
}
