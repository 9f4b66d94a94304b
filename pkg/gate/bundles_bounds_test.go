package gate

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// doWithin is do with the request given up after d: it reports whether an
// answer came in time.
func (b *bundleWorld) doWithin(d time.Duration, method, path, ctype string, body []byte) (int, bool) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+b.tg.addr+path, bytes.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testWorkerToken)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		return 0, false
	}
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, true
}

// scratches counts the scratch directories under the public root.
func (b *bundleWorld) scratches() int {
	ents, _ := filepath.Glob(filepath.Join(b.tg.cfg.PublicRepositoryRoot, ".forge-scratch-*"))
	return len(ents)
}

// waitFor polls cond, failing after a liveness bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for guard := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(guard) {
			t.Fatal(what)
		}
	}
}

// A Worker's base reads beyond worker_source_reads and its uploads beyond
// one wait for a slot before the Gate does any work for them; a request
// that stops waiting takes no slot.
func TestBundleSlotsPerWorker(t *testing.T) {
	b := newBundleWorld(t)
	slots := b.tg.g.bundleSlots[0]
	source := wire.SourcePath + "?" + wire.SourceRequest{AttemptBinding: b.binding(), Want: b.base}.Query()
	for len(slots.reads) < cap(slots.reads) {
		slots.reads <- struct{}{}
	}
	if code, answered := b.doWithin(300*time.Millisecond, "GET", source, "", nil); answered {
		t.Fatalf("a base read beyond the Worker's slots was answered %d", code)
	}
	<-slots.reads
	if code, answered := b.doWithin(20*time.Second, "GET", source, "", nil); !answered || code != http.StatusOK {
		t.Fatalf("a base read with a free slot: %d %v", code, answered)
	}

	cand, tree := b.commit(b.base, map[string][]byte{"new.txt": []byte("new\n")})
	put := wire.CandidatePath + "?" + wire.CandidateRequest{AttemptBinding: b.binding(), Candidate: cand, Tree: tree}.Query()
	bundle := b.bundle(wire.CandidateRef(b.lease.JobID, b.lease.AttemptID), cand, b.base)
	slots.uploads <- struct{}{}
	if code, answered := b.doWithin(300*time.Millisecond, "PUT", put, wire.BundleContentType, bundle); answered {
		t.Fatalf("a second upload of the Worker was answered %d", code)
	}
	if refs, _ := b.stored(); refs != "" {
		t.Fatalf("an upload waiting for its slot stored %q", refs)
	}
	<-slots.uploads
	if code, answered := b.doWithin(20*time.Second, "PUT", put, wire.BundleContentType, bundle); !answered || code != http.StatusNoContent {
		t.Fatalf("an upload with a free slot: %d %v", code, answered)
	}
}

// A reader that stops taking a base bundle is cut off after the stall
// timeout: its temporary bundle is removed and its read slot freed while
// it still holds the connection, and it never gets the whole bundle.
func TestBaseReadStalledIsCutOff(t *testing.T) {
	noise := make([]byte, 12<<20) // well past the socket buffers
	rand.Read(noise)
	b := newBundleWorldWith(t, func(g *Gate) {
		g.sourceStall = 300 * time.Millisecond
		g.bundleSlots[0].reads = make(chan struct{}, 1)
	}, map[string][]byte{"noise.bin": noise})
	source := wire.SourcePath + "?" + wire.SourceRequest{AttemptBinding: b.binding(), Want: b.base}.Query()
	conn, err := net.Dial("tcp", b.tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+source+" HTTP/1.1\r\nHost: forge\r\nAuthorization: Bearer "+testWorkerToken+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The stalled reader holds the Worker's one read slot (its bundle is
	// made) until it is cut off; the next read gets it only then.
	waitFor(t, "the stalled read never made its bundle", func() bool { return b.scratches() == 1 })
	if code, answered := b.doWithin(20*time.Second, "GET", source, "", nil); !answered || code != http.StatusOK {
		t.Fatalf("the read after a stalled one: %d %v", code, answered)
	}
	waitFor(t, "a stalled read's temporary bundle stays", func() bool { return b.scratches() == 0 })
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || n >= resp.ContentLength {
		t.Fatalf("the stalled reader got %d of %d bytes (%v)", n, resp.ContentLength, err)
	}
}

// A candidate upload whose Worker goes away mid-body leaves no temporary
// file and frees its slot.
func TestCandidateUploadCutOffLeavesNothing(t *testing.T) {
	b := newBundleWorld(t)
	cand, tree := b.commit(b.base, map[string][]byte{"new.txt": []byte("new\n")})
	put := wire.CandidatePath + "?" + wire.CandidateRequest{AttemptBinding: b.binding(), Candidate: cand, Tree: tree}.Query()
	bundle := b.bundle(wire.CandidateRef(b.lease.JobID, b.lease.AttemptID), cand, b.base)
	conn, err := net.Dial("tcp", b.tg.addr)
	if err != nil {
		t.Fatal(err)
	}
	head := "PUT " + put + " HTTP/1.1\r\nHost: forge\r\nAuthorization: Bearer " + testWorkerToken +
		"\r\nContent-Type: " + wire.BundleContentType + "\r\nContent-Length: " + strconv.Itoa(len(bundle)) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head+string(bundle[:len(bundle)/2])); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the upload never reached its scratch directory", func() bool { return b.scratches() == 1 })
	conn.Close()
	// The next upload takes the slot once the cut one is gone.
	if code, answered := b.doWithin(20*time.Second, "PUT", put, wire.BundleContentType, bundle); !answered || code != http.StatusNoContent {
		t.Fatalf("the upload after a cut one: %d %v", code, answered)
	}
	if n := b.scratches(); n != 0 {
		t.Fatalf("%d scratch directories left", n)
	}
}
