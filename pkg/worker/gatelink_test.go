package worker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/wire"
)

// A base bundle that keeps coming is fetched however long it takes in
// all (here 3 s against an idle bound of 1 s; with the old bound of one
// git_timeout on the whole download it failed); one that stops coming
// for the idle bound is given up, and so is a Gate that never answers.
func TestFetchBaseIdleBound(t *testing.T) {
	const chunks = 30
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("want") == strings.Repeat("0", 40) {
			select { // never answers
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", wire.BundleContentType)
		flusher := w.(http.Flusher)
		for i := range chunks {
			if r.URL.Query().Get("want") == strings.Repeat("1", 40) && i == 3 {
				select { // stalls
				case <-stop:
				case <-r.Context().Done():
				}
				return
			}
			w.Write([]byte("0123456789"))
			flusher.Flush()
			time.Sleep(100 * time.Millisecond)
		}
	}))
	defer srv.Close()
	defer close(stop) // before the server's Close, which waits for its handlers
	u, _ := url.Parse(strings.Replace(srv.URL, "http://", "ws://", 1))
	l := newGateLink(u, "worker-token-0000001", newHTTPClient(), wire.AttemptBinding{Lane: "lane", Generation: strings.Repeat("a", 32),
		JobID: strings.Repeat("b", 32), AttemptID: strings.Repeat("c", 32)})
	dir := t.TempDir()
	n, err := l.FetchBase(context.Background(), strings.Repeat("2", 40), nil, filepath.Join(dir, "flowing"), 1<<20, time.Second)
	if err != nil || n != 10*chunks {
		t.Fatalf("a bundle that flows for 3 s: %d bytes, %v", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "flowing")); len(b) != 10*chunks {
		t.Fatalf("wrote %d bytes", len(b))
	}
	var le *LinkError
	if _, err := l.FetchBase(context.Background(), strings.Repeat("1", 40), nil, filepath.Join(dir, "stalled"), 1<<20, time.Second); !errors.As(err, &le) {
		t.Fatalf("a stalled bundle: %v", err)
	}
	if _, err := l.FetchBase(context.Background(), strings.Repeat("0", 40), nil, filepath.Join(dir, "silent"), 1<<20, time.Second); !errors.As(err, &le) {
		t.Fatalf("a Gate that never answers: %v", err)
	}
}
