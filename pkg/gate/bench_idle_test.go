package gate

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

var idleProfile = flag.String("idleprofile", "", "BenchmarkIdleLanes: write a heap profile with the lanes connected to this file")

// BenchmarkIdleLanes measures what an idle lane costs the Gate: N lanes
// say hello, get welcome and stay silent; the Go heap in use (after a GC),
// the goroutine stacks and the goroutine count are compared with the
// figures before they connected. The lanes are raw TCP connections that
// speak the handshake and one masked frame by hand, so the client side
// adds only its net.Conn per lane (no buffers, no goroutine) to the
// figures. With -idleprofile FILE, a heap profile is taken while the
// lanes are connected (go tool pprof -sample_index=inuse_space FILE),
// and their stacks in FILE.goroutines.
func BenchmarkIdleLanes(b *testing.B) {
	for _, lanes := range []int{256} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				idleLanes(b, lanes)
			}
		})
	}
}

func idleLanes(b *testing.B, lanes int) {
	if *idleProfile != "" {
		old := runtime.MemProfileRate
		runtime.MemProfileRate = 1 // every allocation, for an exact breakdown
		defer func() { runtime.MemProfileRate = old }()
	}
	tg := benchGate(b, lanes)
	heap0, stack0, gr0 := memFigures()
	conns := make([]net.Conn, 0, lanes)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < lanes; i++ {
		conns = append(conns, rawIdleLane(b, tg.addr, i))
	}
	// The lanes' goroutines are parked in Receive once welcome is out;
	// give the last ones a moment to get there.
	time.Sleep(100 * time.Millisecond)
	heap1, stack1, gr1 := memFigures()
	if *idleProfile != "" {
		f, err := os.Create(*idleProfile)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
		g, _ := os.Create(*idleProfile + ".goroutines")
		pprof.Lookup("goroutine").WriteTo(g, 2)
		g.Close()
	}
	n := float64(lanes)
	b.ReportMetric(float64(heap1-heap0)/n, "heap_B/lane")
	b.ReportMetric(float64(stack1-stack0)/n, "stack_B/lane")
	b.ReportMetric(float64(heap1+stack1-heap0-stack0)/n, "B/lane")
	b.ReportMetric(float64(gr1-gr0)/n, "goroutines/lane")
}

// memFigures returns the live heap and goroutine stack bytes after a full
// GC, and the goroutine count.
func memFigures() (heap, stack uint64, goroutines int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse, runtime.NumGoroutine()
}

// rawIdleLane opens one lane by hand: the upgrade request, the hello as
// one masked text frame, and the welcome frame read back.
func rawIdleLane(b *testing.B, addr string, slot int) net.Conn {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(waitLimit))
	req := "GET " + wire.Path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Authorization: Bearer " + benchWorkerToken + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		b.Fatal(err)
	}
	var head []byte
	one := make([]byte, 1)
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		if _, err := c.Read(one); err != nil {
			b.Fatalf("upgrade response: %v", err)
		}
		head = append(head, one[0])
	}
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 101")) {
		b.Fatalf("upgrade refused: %q", head)
	}
	hello := `{"type":"hello","hello":{"protocol":"` + wire.Protocol + `","worker_id":"worker-1","slot":` + strconv.Itoa(slot) +
		`,"plugins":["reference"],"repositories":[]}}`
	if _, err := c.Write(maskedText([]byte(hello))); err != nil {
		b.Fatal(err)
	}
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(c, hdr); err != nil {
		b.Fatalf("welcome: %v", err)
	}
	size := int(hdr[1] & 0x7f)
	if size == 126 {
		ext := make([]byte, 2)
		if _, err := io.ReadFull(c, ext); err != nil {
			b.Fatal(err)
		}
		size = int(binary.BigEndian.Uint16(ext))
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(c, payload); err != nil {
		b.Fatal(err)
	}
	if !bytes.Contains(payload, []byte(`"welcome"`)) {
		b.Fatalf("no welcome: %q", payload)
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// maskedText frames p as one masked text frame (a client's, RFC 6455 5.3).
func maskedText(p []byte) []byte {
	var f []byte
	switch {
	case len(p) < 126:
		f = []byte{0x81, 0x80 | byte(len(p))}
	default:
		f = []byte{0x81, 0x80 | 126, byte(len(p) >> 8), byte(len(p))}
	}
	key := make([]byte, 4)
	_, _ = rand.Read(key)
	f = append(f, key...)
	for i, c := range p {
		f = append(f, c^key[i%4])
	}
	return f
}
