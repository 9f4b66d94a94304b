package store

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"testing"
)

// queueBehindBlocked runs fns as writer operations that share one batch:
// they are queued while an earlier operation holds the writer. It returns
// each operation's answer.
func queueBehindBlocked(t *testing.T, s *Store, fns ...func(*wtx) error) []error {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.w.do(bg, func(*wtx) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	ops := make([]*op, len(fns))
	for i, fn := range fns {
		ops[i] = &op{ctx: bg, done: make(chan error, 1), fn: fn}
		s.w.ops <- ops[i]
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(ops))
	for i, o := range ops {
		errs[i] = <-o.done
	}
	return errs
}

func submitFn(t *testing.T, s *Store, j NewJob) func(*wtx) error {
	t.Helper()
	_, fn, err := s.submitOp(j, t0)
	if err != nil {
		t.Fatal(err)
	}
	return fn
}

// TestPolicyRefsSurviveRollback: a submit that inserts a new policy row and
// then fails is rolled back, and the row id it had taken is reused by the
// next new policy; neither the writer's cache nor a later lease may then
// confuse the two documents. Covered both in a shared batch (savepoint
// re-run) and alone, then through a reopened store (cold cache).
func TestPolicyRefsSurviveRollback(t *testing.T) {
	s, path := openFile(t)
	jobs := make([]NewJob, 6)
	for i := range jobs {
		jobs[i] = textJob(fmt.Sprintf("j%d", i+1), i+1) // six distinct policies
	}
	mustSubmit(t, s, jobs[0], t0)
	dup := func(p []byte) NewJob {
		j := jobs[0]
		j.Policy = p
		return j
	}
	// One batch: a duplicate job id with a new policy fails after inserting
	// the policy; the next two submits insert policies of their own, the
	// second one the failed submit's policy again.
	errs := queueBehindBlocked(t, s,
		submitFn(t, s, dup(jobs[2].Policy)),
		submitFn(t, s, jobs[1]),
		submitFn(t, s, jobs[2]))
	if !errors.Is(errs[0], ErrConflict) || errs[1] != nil || errs[2] != nil {
		t.Fatalf("batch answers %v", errs)
	}
	// Alone: the same with the writer's cache warm.
	if _, err := s.Submit(bg, dup(jobs[4].Policy), t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate submit: %v", err)
	}
	mustSubmit(t, s, jobs[3], t0)
	mustSubmit(t, s, jobs[4], t0)

	check := func(s *Store, n int) {
		t.Helper()
		mustConnect(t, s, fmt.Sprintf("worker-%d", n), gen(n), t0)
		l := mustLease(t, s, fmt.Sprintf("worker-%d", n), gen(n), t0)
		if l.JobID != jobs[n-1].ID || !bytes.Equal(l.Policy, jobs[n-1].Policy) {
			t.Fatalf("lease %d: job %s with another job's policy", n, l.JobID)
		}
	}
	for n := 1; n <= 3; n++ {
		check(s, n)
	}
	s.Close()
	s = mustOpen(t, path)
	for n := 4; n <= 5; n++ {
		check(s, n)
	}
	// A reopened store interns into the existing rows.
	mustSubmit(t, s, jobs[5], t0)
	check(s, 6)
	s.Close()

	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var rows, distinct int
	if err := raw.QueryRow(`SELECT count(*), count(DISTINCT body) FROM policies`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != len(jobs) || distinct != len(jobs) {
		t.Fatalf("policies: %d rows, %d distinct", rows, distinct)
	}
	for _, j := range jobs {
		var body []byte
		if err := raw.QueryRow(`SELECT p.body FROM jobs j JOIN policies p ON p.id = j.policy_id WHERE j.id = ?`, j.ID).Scan(&body); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, j.Policy) {
			t.Fatalf("job %s references another policy", j.ID)
		}
	}
}

// TestPolicyRefsShared: jobs with the same policy share one row.
func TestPolicyRefsShared(t *testing.T) {
	s, path := openFile(t)
	for i := 0; i < 5; i++ {
		mustSubmit(t, s, textJob(fmt.Sprintf("s%d", i), 2), t0)
	}
	s.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var rows int
	if err := raw.QueryRow(`SELECT count(*) FROM policies`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("policies: %d rows %v", rows, err)
	}
}
