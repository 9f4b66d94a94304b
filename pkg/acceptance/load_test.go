package acceptance

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestManyJobsWhileHostileClientsPush: two real Workers with two lanes each
// run many concurrently submitted jobs exactly once, while a third Worker's
// lane floods heartbeats without ever reading, and unauthenticated clients
// hammer the WebSocket endpoint. Nothing is lost, duplicated or mixed up.
func TestManyJobsWhileHostileClientsPush(t *testing.T) {
	t.Parallel()
	g := newGate(t, gateOpts{workers: []gateWorker{
		{id: "worker-1", concurrency: 2}, {id: "worker-2", concurrency: 2}, {id: "pusher", concurrency: 1}}})
	g.startWorker(t, workerOpts{index: 0})
	g.startWorker(t, workerOpts{index: 1})

	// The pusher: hello, then heartbeats for a made-up attempt, never
	// reading a reply.
	// Its hello offers no plugin, so no job is ever leased to it.
	p, resp := dialRaw(t, g.addr, "Bearer "+g.workers[2].token)
	if p == nil {
		t.Fatalf("pusher dial: %d", resp.StatusCode)
	}
	p.sendText(t, `{"type":"hello","hello":{"protocol":"forge-wire/v1","worker_id":"pusher","slot":0,"plugins":[],"repositories":[]}}`)
	if e := p.recv(t); e.Type != "welcome" {
		t.Fatalf("pusher: %+v", e)
	}
	stop := make(chan struct{})
	var hostile sync.WaitGroup
	hostile.Add(2)
	go func() {
		defer hostile.Done()
		msg := []byte(`{"type":"heartbeat","seq":1,"heartbeat":{"job_id":"` + strings.Repeat("a", 32) + `","attempt_id":"` + strings.Repeat("b", 32) + `"}}`)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p.writeFrame(opText, msg) != nil {
				return // the Gate gave up on us: fine
			}
		}
	}()
	go func() {
		defer hostile.Done()
		for i := 0; i < 300; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if code := dialStatus(g.addr, "Bearer nope"); code != http.StatusUnauthorized {
				t.Errorf("unauthenticated dial: %d", code)
				return
			}
		}
	}()

	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ids[i] = g.submit(t, fmt.Sprintf(`{"input":"job number %d"}`, i))
		}(i)
	}
	wg.Wait()
	lanes := map[string]int{}
	for i, id := range ids {
		j := g.waitTerminal(t, id)
		want := fmt.Sprintf("JOB NUMBER %d", i)
		if j.Status != "succeeded" || j.Result == nil || *j.Result != want || j.AttemptCount != 1 {
			t.Fatalf("job %d: %+v", i, j)
		}
		a := g.aggregate(t, id)
		if len(a.Attempts) != 1 {
			t.Fatalf("job %d attempts %+v", i, a.Attempts)
		}
		lanes[a.Attempts[0].WorkerID]++
	}
	close(stop)
	p.c.Close()
	hostile.Wait()
	for lane := range lanes {
		if !strings.HasPrefix(lane, "worker-") {
			t.Fatalf("a job ran on lane %q", lane)
		}
	}
	if r := g.do(t, "GET", "/readyz", nil); r.status != http.StatusOK {
		t.Fatalf("readyz: %d", r.status)
	}
	g.assertNoSecrets(t)
}

// dialStatus sends one WebSocket handshake and returns the HTTP status (0
// on a transport error); usable from any goroutine.
func dialStatus(addr, auth string) int {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /v1/worker/connect HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: " + auth + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
