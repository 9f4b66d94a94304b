package debugview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Secret-looking values planted in the backing data; no response may
// contain any of them.
var plantedSecrets = []string{
	"SECRET-TASK-INPUT", "SECRET-INSTRUCTION", "/srv/private/repos/agent-forge.git",
	"SECRET-RESULT-BODY", "SECRET-EVIDENCE-OUTPUT", "Bearer SECRET-TOKEN", "SECRET-EVENT-DETAIL",
}

// fakeRow is what a real store holds for a job: the diagnostic part plus
// the content the viewer must never show.
type fakeRow struct {
	job      Job
	attempts []Attempt
	events   []Event
	// never shown
	input, instruction, repoPath, result, evidence, authorization, eventDetail string
}

type fakeStore struct {
	mu    sync.Mutex
	rows  map[string]*fakeRow
	lanes []Lane
	calls int
	fail  error
}

var base = time.Date(2026, 11, 29, 19, 20, 17, 123456789, time.UTC)

// newFakeStore builds n jobs (j_0000 oldest … newest), some sharing a
// creation time so the ID tie-break matters, and m lanes.
func newFakeStore(n, m int) *fakeStore {
	s := &fakeStore{rows: map[string]*fakeRow{}}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("j_%04d", i)
		created := base.Add(time.Duration(i/2) * time.Millisecond)
		row := &fakeRow{
			job: Job{ID: id, Kind: "coding", Status: "failed", FailureCode: "scoped_test_failed",
				RepositoryID: "agent-forge", BaseSHA: "0123456789abcdef0123456789abcdef01234567",
				AttemptCount: 2,
				CreatedAt:    created, UpdatedAt: created.Add(time.Second)},
			input: plantedSecrets[0], instruction: plantedSecrets[1], repoPath: plantedSecrets[2],
			result: plantedSecrets[3], evidence: plantedSecrets[4], authorization: plantedSecrets[5], eventDetail: plantedSecrets[6],
		}
		for o := 1; o <= 2; o++ {
			row.attempts = append(row.attempts, Attempt{ID: fmt.Sprintf("a_%d_%d", i, o), Ordinal: o, Status: "failed",
				Lane: "worker-1#1", LeasedAt: created, DeadlineAt: created.Add(30 * time.Second), CompletedAt: created.Add(time.Second),
				Disposition: "retryable", FailureCode: "execution_failed"})
		}
		for seq := int64(1); seq <= 30; seq++ {
			row.events = append(row.events, Event{Seq: seq, Type: "leased", At: created.Add(time.Duration(seq) * time.Microsecond), Attempt: 1})
		}
		s.rows[id] = row
	}
	for i := 0; i < m; i++ {
		l := Lane{Lane: fmt.Sprintf("worker-%02d", i), WorkerID: fmt.Sprintf("worker-%02d", i), Pool: "default",
			Connected: i%2 == 0, ConnectedAt: base, JobID: "j_0001", AttemptID: "a_1_1"}
		if !l.Connected {
			l.DisconnectedAt = base.Add(time.Minute)
		}
		s.lanes = append(s.lanes, l)
	}
	return s
}

func (s *fakeStore) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.fail
}

func (s *fakeStore) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func newer(a, b Job) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

func (s *fakeStore) DebugJobs(_ context.Context, afterID string, limit int) ([]Job, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	var all []Job
	for _, r := range s.rows {
		all = append(all, r.job)
	}
	sort.Slice(all, func(i, j int) bool { return newer(all[i], all[j]) })
	start := 0
	if afterID != "" {
		start = len(all)
		for i, j := range all {
			if j.ID == afterID {
				start = i + 1
			}
		}
	}
	all = all[start:]
	return all[:min(limit, len(all))], nil
}

func (s *fakeStore) DebugLanes(_ context.Context, after string, limit int) ([]Lane, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	var out []Lane
	for _, l := range s.lanes {
		if l.Lane > after && len(out) < limit {
			out = append(out, l)
		}
	}
	return out, nil
}

func (s *fakeStore) DebugJob(_ context.Context, id string) (Job, []Attempt, error) {
	if err := s.enter(); err != nil {
		return Job{}, nil, err
	}
	r := s.rows[id]
	if r == nil {
		return Job{}, nil, fmt.Errorf("lookup: %w", ErrNotFound)
	}
	return r.job, r.attempts, nil
}

func (s *fakeStore) DebugEvents(_ context.Context, id string, afterSeq int64, limit int) ([]Event, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	r := s.rows[id]
	if r == nil {
		return nil, ErrNotFound
	}
	var out []Event
	for _, e := range r.events {
		if e.Seq > afterSeq && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

var errDiskOnFire = errors.New("sqlite: disk I/O error at /srv/private/state/forge.db")
