package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/policy"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// privateDir returns a fresh 0700 directory inside t.TempDir().
func privateDir(tb testing.TB) string {
	tb.Helper()
	d := filepath.Join(tb.TempDir(), "state")
	if err := os.Mkdir(d, 0o700); err != nil {
		tb.Fatal(err)
	}
	return d
}

func mustOpen(tb testing.TB, dsn string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func openFile(tb testing.TB) (*Store, string) {
	tb.Helper()
	path := filepath.Join(privateDir(tb), "forge.db")
	return mustOpen(tb, path), path
}

func testPolicy(ttl, base time.Duration, maxAttempts int, plugin string) []byte {
	return policy.Resolve(
		policy.Lifecycle{LeaseTTL: policy.Duration(ttl), RetryBase: policy.Duration(base), MaxAttempts: maxAttempts},
		policy.Execution{
			PluginID: plugin, Environment: []string{"PATH"},
			PluginTimeout: policy.Duration(time.Minute), CheckTimeout: policy.Duration(time.Minute),
			GitTimeout: policy.Duration(time.Minute), CleanupTimeout: policy.Duration(time.Second),
			PluginOutputBytes: 1 << 20, CheckOutputBytes: 2048, GitOutputBytes: 1 << 20,
		}).Canonical()
}

func textJob(id string, maxAttempts int) NewJob {
	return NewJob{ID: id, Kind: KindText, Task: []byte(`{"input":"hello"}`), Pool: "coding",
		Policy: testPolicy(30*time.Second, time.Second, maxAttempts, "reference")}
}

func mustSubmit(tb testing.TB, s *Store, j NewJob, now time.Time) Job {
	tb.Helper()
	job, err := s.Submit(context.Background(), j, now)
	if err != nil {
		tb.Fatalf("submit: %v", err)
	}
	return job
}

func mustConnect(tb testing.TB, s *Store, lane, gen string, now time.Time) {
	tb.Helper()
	if err := s.ConnectLane(context.Background(), lane, "worker-1", 0, gen, now); err != nil {
		tb.Fatalf("connect: %v", err)
	}
}

func mustLease(tb testing.TB, s *Store, lane, gen string, now time.Time) *Lease {
	tb.Helper()
	l, err := s.Lease(context.Background(), lane, gen, "coding", []string{"reference"}, nil, now)
	if err != nil {
		tb.Fatalf("lease: %v", err)
	}
	if l == nil {
		tb.Fatal("lease: nothing eligible")
	}
	return l
}

func fenceOf(l *Lease, lane, gen string) Fence {
	return Fence{JobID: l.JobID, AttemptID: l.AttemptID, Lane: lane, Generation: gen}
}

func textOK(s string) Outcome { return Outcome{Succeeded: true, Output: &s} }

func retryable() Outcome {
	return Outcome{Disposition: DispositionRetryable, FailureCode: "execution_failed"}
}

func gen(i int) string { return fmt.Sprintf("%032x", i) }
