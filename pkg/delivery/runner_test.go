package delivery

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
)

// memStore is a Store in memory; it can lose the commit of one save to
// model a crash after a side effect and before its transition committed.
type memStore struct {
	mu     sync.Mutex
	states map[string]State
	saves  int
	// crashAt: when saves reaches it, the save is not committed and the
	// context is cancelled (the process dies).
	crashAt int
	cancel  context.CancelFunc
}

func (s *memStore) ActiveDeliveries(ctx context.Context) ([]State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []State
	for _, st := range s.states {
		if !st.Phase.Terminal() {
			out = append(out, st)
		}
	}
	return out, nil
}

func (s *memStore) SaveDelivery(ctx context.Context, prev, next State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saves++
	if s.saves == s.crashAt {
		s.cancel()
		return context.Canceled
	}
	if !reflect.DeepEqual(s.states[prev.JobID], prev) {
		panic("save from a stale state")
	}
	s.states[next.JobID] = next
	return nil
}

func TestRunnerSurvivesACrashAtEverySave(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Saves of a clean run: push, pull request, ci (waiting), ci
	// (success), merge. Crash before each commit in turn, restart with a
	// new Machine (no cached token), and check one branch, one pull
	// request, one merge.
	for crash := 1; crash <= 6; crash++ {
		clock := newClock()
		gh := newFake(t, clock)
		st := &memStore{states: map[string]State{"job1": New("job1", testRepo, "main", cand, clock.Now())}, crashAt: crash}
		polls := 0
		gh.failRuns = func() error {
			polls++
			if polls == 2 {
				gh.runs = []Run{{HeadSHA: cand, Status: "completed", Conclusion: "success"}}
				gh.etag++
			}
			return nil
		}
		for life := 0; life < 2; life++ {
			ctx, cancel := context.WithCancel(context.Background())
			st.cancel = cancel
			m, err := NewMachine(gh, testConfig(), clock)
			if err != nil {
				t.Fatal(err)
			}
			r := NewRunner(m, st, clock, log, func(err error) { t.Errorf("fatal: %v", err) })
			if _, err := r.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			r.Wait()
			cancel()
		}
		final := st.states["job1"]
		if final.Phase != PhaseMerged || final.MergeSHA != "m1" {
			t.Fatalf("crash at save %d: %+v", crash, final)
		}
		if len(gh.branches) != 1 || len(gh.prs) != 1 || gh.merges != 1 {
			t.Fatalf("crash at save %d: %d branches, %d prs, %d merges", crash, len(gh.branches), len(gh.prs), gh.merges)
		}
	}
}

func TestRunnerResumeStartsEachOnce(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clock := newClock()
	gh := newFake(t, clock)
	st := &memStore{states: map[string]State{
		"a": New("a", testRepo, "main", cand, clock.Now()),
		"b": fail(New("b", testRepo, "main", cand, clock.Now()), CodeCIFailed),
	}}
	m, _ := NewMachine(gh, testConfig(), clock)
	r := NewRunner(m, st, clock, log, func(error) {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the goroutine returns at its first wait or step
	n, err := r.Resume(ctx)
	if err != nil || n != 1 {
		t.Fatalf("started %d (%v), want only the active one", n, err)
	}
	r.Wait()
}
