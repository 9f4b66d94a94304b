package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/0k-lab/agent-forge/pkg/ident"
)

var bg = context.Background()

func eventTypes(t *testing.T, s *Store, id string) []string {
	t.Helper()
	evs, err := s.Events(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		if e.Seq != i+1 {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		out[i] = e.Type
	}
	return out
}

func wantTypes(t *testing.T, s *Store, id string, want ...string) {
	t.Helper()
	if got := eventTypes(t, s, id); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func mustJob(t *testing.T, s *Store, id string) Job {
	t.Helper()
	j, err := s.Job(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestMigrationsIdempotentAcrossReopen(t *testing.T) {
	if len(migrations()) != SchemaVersion {
		t.Fatalf("SchemaVersion %d but %d migrations", SchemaVersion, len(migrations()))
	}
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	s.Close()
	for i := 0; i < 3; i++ {
		s = mustOpen(t, path)
		if mustJob(t, s, "j1").Status != JobPending {
			t.Fatal("job lost across reopen")
		}
		s.Close()
	}
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var version, rows int
	if err := raw.QueryRow("SELECT version, (SELECT count(*) FROM schema_version) FROM schema_version").Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	if version != SchemaVersion || rows != 1 {
		t.Fatalf("schema_version %d (%d rows)", version, rows)
	}
	if _, err := raw.Exec("UPDATE schema_version SET version = ?", SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := Open(bg, path); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("newer schema: %v", err)
	}
}

func TestCheckConstraintsGuardStates(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 1), t0)
	s.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{
		"UPDATE jobs SET status = 'bogus'",
		"UPDATE jobs SET status = 'leased'",     // leased needs a current attempt
		"UPDATE jobs SET status = 'retry_wait'", // needs retry_at
		"UPDATE jobs SET status = 'failed'",     // needs a failure code
		"UPDATE jobs SET kind = 'other'",
		"UPDATE jobs SET attempt_count = 2", // above max_attempts
		"INSERT INTO events (job_seq, seq, type, at) VALUES (1, 9, 'bogus', 0)",
		"INSERT INTO events (job_seq, seq, type, at) VALUES (999, 1, 'submitted', 0)",
		"INSERT INTO events (job_seq, seq, type, at) VALUES (1, 1, 'submitted', 0)", // duplicate seq
		"INSERT INTO lanes (lane, worker_id, slot, generation, connected, connected_at) VALUES ('w', 'w', 0, 'g', 2, 0)",
	} {
		if _, err := raw.Exec("PRAGMA foreign_keys = ON; " + q); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	// Control: a well-formed row of the same shapes is accepted.
	if _, err := raw.Exec("PRAGMA foreign_keys = ON; INSERT INTO events (job_seq, seq, type, at) VALUES (1, 9, 'submitted', 0)"); err != nil {
		t.Fatalf("control insert: %v", err)
	}
	if _, err := raw.Exec("UPDATE jobs SET status = 'failed', failure_code = 'invalid_task'"); err != nil {
		t.Fatalf("control update: %v", err)
	}
}

func TestSubmitValidation(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("j1", 1), t0)
	if _, err := s.Submit(bg, textJob("j1", 1), t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate id: %v", err)
	}
	bad := map[string]func(*NewJob){
		"id":             func(j *NewJob) { j.ID = "a/b" },
		"empty id":       func(j *NewJob) { j.ID = "" },
		"pool":           func(j *NewJob) { j.Pool = "Pool" },
		"kind":           func(j *NewJob) { j.Kind = "other" },
		"text with repo": func(j *NewJob) { j.RepositoryID = "repo" },
		"coding no repo": func(j *NewJob) { j.Kind = KindCoding },
		"task array":     func(j *NewJob) { j.Task = []byte(`["x"]`) },
		"task garbage":   func(j *NewJob) { j.Task = []byte(`{"input":`) },
		"policy garbage": func(j *NewJob) { j.Policy = []byte(`{}`) },
		"policy spacing": func(j *NewJob) { j.Policy = append([]byte(" "), j.Policy...) },
		"task too large": func(j *NewJob) { j.Task = make([]byte, MaxTaskBytes+1) },
	}
	for name, mutate := range bad {
		j := textJob("j2", 1)
		mutate(&j)
		if _, err := s.Submit(bg, j, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := s.Job(bg, "j2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rejected submit left a job: %v", err)
	}
	job := mustSubmit(t, s, NewJob{ID: "c1", Kind: KindCoding, Task: []byte(`{"repository_id":"repo"}`), Pool: "coding",
		RepositoryID: "repo", Policy: testPolicy(time.Minute, time.Second, 2, "codex")}, t0)
	if job.Status != JobPending || job.RepositoryID != "repo" || job.PluginID != "codex" || !job.CreatedAt.Equal(t0) {
		t.Fatalf("job %+v", job)
	}
	if got := mustJob(t, s, "c1"); !reflect.DeepEqual(got, job) {
		t.Fatalf("read back %+v, want %+v", got, job)
	}
}

func TestLeaseEligibility(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustConnect(t, s, "worker-1", gen(1), t0)
	if l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, nil, t0); err != nil || l != nil {
		t.Fatalf("empty queue: %v %v", l, err)
	}
	other := textJob("other-pool", 1)
	other.Pool = "gpu"
	mustSubmit(t, s, other, t0)
	plug := textJob("other-plugin", 1)
	plug.Policy = testPolicy(30*time.Second, time.Second, 1, "codex")
	mustSubmit(t, s, plug, t0)
	mustSubmit(t, s, NewJob{ID: "code", Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo-b",
		Policy: testPolicy(30*time.Second, time.Second, 1, "reference")}, t0)
	mustSubmit(t, s, textJob("first", 1), t0.Add(time.Microsecond))
	mustSubmit(t, s, textJob("second", 1), t0.Add(2*time.Microsecond))

	lease := func(g string, repos []string) *Lease {
		t.Helper()
		l, err := s.Lease(bg, "worker-1", g, "coding", []string{"reference"}, repos, t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// Oldest eligible first; the coding job needs its repository.
	l := lease(gen(1), []string{"repo-a"})
	if l == nil || l.JobID != "first" || l.Ordinal != 1 || l.Kind != KindText {
		t.Fatalf("lease %+v", l)
	}
	if string(l.Task) != `{"input":"hello"}` || string(l.Policy) != string(testPolicy(30*time.Second, time.Second, 1, "reference")) {
		t.Fatalf("lease payload %s %s", l.Task, l.Policy)
	}
	if !l.DeadlineAt.Equal(t0.Add(31*time.Second)) || len(l.AttemptID) != 32 {
		t.Fatalf("lease %+v", l)
	}
	if _, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, nil, t0); !errors.Is(err, ErrLaneBusy) {
		t.Fatalf("second lease on a busy generation: %v", err)
	}
	mustConnect(t, s, "worker-1#1", gen(2), t0)
	l2, err := s.Lease(bg, "worker-1#1", gen(2), "coding", []string{"reference"}, []string{"repo-b"}, t0)
	if err != nil || l2 == nil || l2.JobID != "code" || l2.RepositoryID != "repo-b" {
		t.Fatalf("coding lease %+v %v", l2, err)
	}
	if _, err := s.Lease(bg, "worker-2", gen(3), "coding", []string{"reference"}, nil, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("lease on an unknown lane: %v", err)
	}
	if _, err := s.Lease(bg, "worker-1", gen(1), "Bad Pool", nil, nil, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed request: %v", err)
	}
	// The aggregate carries the policy copy on the attempt byte-for-byte.
	a, err := s.Aggregate(bg, "first")
	if err != nil || len(a.Attempts) != 1 || a.Attempts[0].WorkerID != "worker-1" || a.Job.Status != JobLeased {
		t.Fatalf("aggregate %+v %v", a, err)
	}
}

func TestAttemptPolicyCopiedByteForByte(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 2), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	s.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The attempt references the job's stored policy row: the identical
	// bytes, which are also what the lease carried and what was submitted.
	var jp, ap []byte
	var same bool
	if err := raw.QueryRow(`SELECT pj.body, pa.body, j.policy_id = a.policy_id
FROM jobs j JOIN attempts a ON a.job_seq = j.seq
  JOIN policies pj ON pj.id = j.policy_id JOIN policies pa ON pa.id = a.policy_id
WHERE a.id = ?`, l.AttemptID).Scan(&jp, &ap, &same); err != nil {
		t.Fatal(err)
	}
	want := textJob("j1", 2).Policy
	if !same || string(jp) != string(ap) || string(ap) != string(l.Policy) || string(jp) != string(want) {
		t.Fatal("attempt policy differs from the job's")
	}
}

func TestHeartbeat(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("j1", 1), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	f := fenceOf(l, "worker-1", gen(1))
	d, err := s.Heartbeat(bg, f, t0.Add(10*time.Second))
	if err != nil || !d.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("heartbeat %v %v", d, err)
	}
	// An earlier clock never shortens the deadline.
	d, err = s.Heartbeat(bg, f, t0.Add(5*time.Second))
	if err != nil || !d.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("heartbeat shortened: %v %v", d, err)
	}
	// Valid strictly before the deadline.
	last := t0.Add(40*time.Second - time.Microsecond)
	if d, err = s.Heartbeat(bg, f, last); err != nil || !d.Equal(last.Add(30*time.Second)) {
		t.Fatalf("last heartbeat %v %v", d, err)
	}
	if _, err := s.Heartbeat(bg, f, d); !errors.Is(err, ErrExpired) {
		t.Fatalf("heartbeat at the deadline: %v", err)
	}
	for name, bad := range map[string]Fence{
		"other job":        {JobID: "j2", AttemptID: f.AttemptID, Lane: f.Lane, Generation: f.Generation},
		"unknown attempt":  {JobID: f.JobID, AttemptID: gen(99), Lane: f.Lane, Generation: f.Generation},
		"other lane":       {JobID: f.JobID, AttemptID: f.AttemptID, Lane: "worker-1#1", Generation: f.Generation},
		"other generation": {JobID: f.JobID, AttemptID: f.AttemptID, Lane: f.Lane, Generation: gen(2)},
	} {
		_, err := s.Heartbeat(bg, bad, t0)
		want := ErrStale
		if name == "other job" || name == "unknown attempt" {
			want = ErrNotFound
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if _, err := s.Heartbeat(bg, Fence{JobID: "j1", AttemptID: "../x", Lane: "w", Generation: "g"}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed fence: %v", err)
	}
}

func TestCompleteSuccessAndReplay(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("j1", 1), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	f := fenceOf(l, "worker-1", gen(1))
	at := t0.Add(2 * time.Second)
	c, err := s.Complete(bg, f, textOK("HELLO"), at)
	if err != nil || c.JobStatus != JobSucceeded || c.Replayed {
		t.Fatalf("complete %+v %v", c, err)
	}
	j := mustJob(t, s, "j1")
	if j.Status != JobSucceeded || j.Result == nil || *j.Result != "HELLO" || !j.UpdatedAt.Equal(at) {
		t.Fatalf("job %+v", j)
	}
	wantTypes(t, s, "j1", EventSubmitted, EventLeased, EventSucceeded)
	// Identical replay (even after the deadline): same answer, nothing new.
	c, err = s.Complete(bg, f, textOK("HELLO"), t0.Add(time.Hour))
	if err != nil || !c.Replayed || c.JobStatus != JobSucceeded {
		t.Fatalf("replay %+v %v", c, err)
	}
	wantTypes(t, s, "j1", EventSubmitted, EventLeased, EventSucceeded)
	if _, err := s.Complete(bg, f, textOK("OTHER"), at); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting replay: %v", err)
	}
	if _, err := s.Complete(bg, f, retryable(), at); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting failure replay: %v", err)
	}
	g2 := f
	g2.Generation = gen(2)
	if _, err := s.Complete(bg, g2, textOK("HELLO"), at); !errors.Is(err, ErrStale) {
		t.Fatalf("replay from another generation: %v", err)
	}
	if *mustJob(t, s, "j1").Result != "HELLO" {
		t.Fatal("result changed")
	}
	// Heartbeats and evidence for a finished attempt are stale.
	if _, err := s.Heartbeat(bg, f, at); !errors.Is(err, ErrStale) {
		t.Fatalf("heartbeat after result: %v", err)
	}
}

func TestCompleteCoding(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, NewJob{ID: "c1", Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo",
		Policy: testPolicy(time.Minute, time.Second, 1, "reference")}, t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, []string{"repo"}, t0)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	f := fenceOf(l, "worker-1", gen(1))
	if _, err := s.Complete(bg, f, textOK("x"), t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("text result for a coding job: %v", err)
	}
	sha := "0123456789abcdef0123456789abcdef01234567"
	report := json.RawMessage(`{ "self_reported": true, "summary": "did it" }`)
	for name, o := range map[string]Outcome{
		"bad sha":      {Succeeded: true, CandidateSHA: "ABC"},
		"report array": {Succeeded: true, CandidateSHA: sha, AgentReport: json.RawMessage(`[1]`)},
		"both":         {Succeeded: true, CandidateSHA: sha, Output: new(string)},
		"neither":      {Succeeded: true},
		"fail fields":  {Succeeded: true, CandidateSHA: sha, FailureCode: "x"},
		"bad disp":     {Disposition: "maybe", FailureCode: "execution_failed"},
		"bad code":     {Disposition: DispositionTerminal, FailureCode: "Bad Code"},
		"reserved":     {Disposition: DispositionTerminal, FailureCode: CodeMaxAttemptsExceeded},
		"fail w/ sha":  {Disposition: DispositionTerminal, FailureCode: "invalid_task", CandidateSHA: sha},
	} {
		if _, err := s.Complete(bg, f, o, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := s.AddEvidence(bg, f, 1, []json.RawMessage{json.RawMessage(`{}`)}, sha, t0); err != nil {
		t.Fatal(err)
	}
	c, err := s.Complete(bg, f, Outcome{Succeeded: true, CandidateSHA: sha, AgentReport: report}, t0)
	if err != nil || c.JobStatus != JobSucceeded {
		t.Fatal(c, err)
	}
	// The replay compares the compacted report.
	if c, err = s.Complete(bg, f, Outcome{Succeeded: true, CandidateSHA: sha, AgentReport: json.RawMessage(`{"self_reported":true,"summary":"did it"}`)}, t0); err != nil || !c.Replayed {
		t.Fatal(c, err)
	}
	a, err := s.Aggregate(bg, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Job.CandidateSHA != sha || a.Job.Result != nil || a.Attempts[0].CandidateSHA != sha ||
		string(a.Attempts[0].AgentReport) != `{"self_reported":true,"summary":"did it"}` {
		t.Fatalf("aggregate %+v", a)
	}
}

func TestRetryableFailureBackoffAndMaxAttempts(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, NewJob{ID: "j1", Kind: KindText, Task: []byte(`{"input":"x"}`), Pool: "coding",
		Policy: testPolicy(time.Minute, 2*time.Second, 3, "reference")}, t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	now := t0
	for ordinal := 1; ordinal <= 3; ordinal++ {
		l := mustLease(t, s, "worker-1", gen(1), now)
		if l.Ordinal != ordinal {
			t.Fatalf("ordinal %d, want %d", l.Ordinal, ordinal)
		}
		now = now.Add(time.Second)
		c, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), retryable(), now)
		if err != nil {
			t.Fatal(err)
		}
		if ordinal < 3 {
			want := now.Add(2 * time.Second << (ordinal - 1))
			if c.JobStatus != JobRetryWait || !c.RetryAt.Equal(want) {
				t.Fatalf("attempt %d: %+v, want retry at %v", ordinal, c, want)
			}
			// An identical replay answers from the job, retry time included;
			// another outcome conflicts.
			r, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), retryable(), now.Add(time.Millisecond))
			if err != nil || !r.Replayed || r.JobStatus != JobRetryWait || !r.RetryAt.Equal(want) {
				t.Fatalf("attempt %d replay: %+v %v", ordinal, r, err)
			}
			if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), textOK("late"), now); !errors.Is(err, ErrConflict) {
				t.Fatalf("attempt %d conflicting replay: %v", ordinal, err)
			}
			j := mustJob(t, s, "j1")
			if j.Status != JobRetryWait || j.RetryAt == nil || !j.RetryAt.Equal(want) {
				t.Fatalf("job %+v", j)
			}
			// Not eligible one microsecond early, eligible at retry_at.
			if l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, nil, want.Add(-time.Microsecond)); err != nil || l != nil {
				t.Fatalf("leased before retry_at: %v %v", l, err)
			}
			if next, ok, err := s.NextDue(bg); err != nil || !ok || !next.Equal(want) {
				t.Fatalf("next due %v %v %v", next, ok, err)
			}
			now = want
		} else if c.JobStatus != JobFailed {
			t.Fatalf("last attempt: %+v", c)
		}
	}
	j := mustJob(t, s, "j1")
	if j.Status != JobFailed || j.FailureCode != CodeMaxAttemptsExceeded || j.AttemptCount != 3 || j.RetryAt != nil {
		t.Fatalf("job %+v", j)
	}
	wantTypes(t, s, "j1", EventSubmitted,
		EventLeased, EventAttemptFailed, EventRetryScheduled,
		EventLeased, EventAttemptFailed, EventRetryScheduled,
		EventLeased, EventAttemptFailed, EventFailed)
	evs, _ := s.Events(bg, "j1")
	if evs[2].Code != "execution_failed" || evs[2].Attempt != 1 || evs[9].Code != CodeMaxAttemptsExceeded || evs[9].Attempt != 3 {
		t.Fatalf("event details %+v", evs)
	}
	if l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, nil, now.Add(time.Hour)); err != nil || l != nil {
		t.Fatalf("failed job leased again: %v %v", l, err)
	}
	a, _ := s.Aggregate(bg, "j1")
	for i, at := range a.Attempts {
		if at.Ordinal != i+1 || at.Status != AttemptFailed || at.Disposition != DispositionRetryable || at.FailureCode != "execution_failed" {
			t.Fatalf("attempt %+v", at)
		}
	}
	if _, ok, _ := s.NextDue(bg); ok {
		t.Fatal("next due with nothing pending")
	}
}

func TestTerminalFailures(t *testing.T) {
	for _, code := range []string{"invalid_task", "scoped_test_failed", "plugin_identity_mismatch"} {
		t.Run(code, func(t *testing.T) {
			s := mustOpen(t, ":memory:")
			mustSubmit(t, s, textJob("j1", 3), t0)
			mustConnect(t, s, "worker-1", gen(1), t0)
			l := mustLease(t, s, "worker-1", gen(1), t0)
			c, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), Outcome{Disposition: DispositionTerminal, FailureCode: code}, t0)
			if err != nil || c.JobStatus != JobFailed {
				t.Fatal(c, err)
			}
			j := mustJob(t, s, "j1")
			if j.Status != JobFailed || j.FailureCode != code || j.AttemptCount != 1 {
				t.Fatalf("job %+v", j)
			}
			wantTypes(t, s, "j1", EventSubmitted, EventLeased, EventAttemptFailed, EventFailed)
		})
	}
}

func TestSweepExpiresAndRetries(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, NewJob{ID: "j1", Kind: KindText, Task: []byte(`{"input":"x"}`), Pool: "coding",
		Policy: testPolicy(10*time.Second, time.Second, 2, "reference")}, t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	f := fenceOf(l, "worker-1", gen(1))
	deadline := t0.Add(10 * time.Second)
	r, err := s.Sweep(bg, deadline.Add(-time.Microsecond))
	if err != nil || len(r.Expired) != 0 || !r.HasNext || !r.NextDue.Equal(deadline) {
		t.Fatalf("early sweep %+v %v", r, err)
	}
	// A late result after the deadline but before the sweep is refused and
	// writes nothing.
	if _, err := s.Complete(bg, f, textOK("late"), deadline); !errors.Is(err, ErrExpired) {
		t.Fatalf("late result: %v", err)
	}
	r, err = s.Sweep(bg, deadline)
	if err != nil || len(r.Expired) != 1 {
		t.Fatalf("sweep %+v %v", r, err)
	}
	e := r.Expired[0]
	want := Expiry{JobID: "j1", AttemptID: l.AttemptID, Ordinal: 1, Lane: "worker-1", Generation: gen(1),
		JobStatus: JobRetryWait, RetryAt: deadline.Add(time.Second)}
	if !reflect.DeepEqual(e, want) || !r.NextDue.Equal(deadline.Add(time.Second)) {
		t.Fatalf("expiry %+v next %v", e, r.NextDue)
	}
	// The expired attempt's late result, heartbeat and evidence are refused.
	if _, err := s.Complete(bg, f, textOK("late"), deadline.Add(-time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("late result after sweep: %v", err)
	}
	if _, err := s.Heartbeat(bg, f, deadline.Add(-time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("late heartbeat: %v", err)
	}
	if _, err := s.AddEvidence(bg, f, 1, []json.RawMessage{json.RawMessage(`{}`)}, "", deadline.Add(-time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("late evidence: %v", err)
	}
	if r, _ := s.Sweep(bg, deadline.Add(time.Hour)); len(r.Expired) != 0 {
		t.Fatal("expired twice")
	}
	l2 := mustLease(t, s, "worker-1", gen(1), deadline.Add(time.Second))
	if l2.Ordinal != 2 || l2.AttemptID == l.AttemptID {
		t.Fatalf("retry lease %+v", l2)
	}
	// The old attempt's result is still refused while the retry runs.
	if _, err := s.Complete(bg, f, textOK("late"), deadline.Add(time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("superseded result: %v", err)
	}
	r, _ = s.Sweep(bg, deadline.Add(time.Hour))
	if len(r.Expired) != 1 || r.Expired[0].JobStatus != JobFailed || r.HasNext {
		t.Fatalf("final sweep %+v", r)
	}
	j := mustJob(t, s, "j1")
	if j.Status != JobFailed || j.FailureCode != CodeMaxAttemptsExceeded {
		t.Fatalf("job %+v", j)
	}
	wantTypes(t, s, "j1", EventSubmitted, EventLeased, EventExpired, EventRetryScheduled, EventLeased, EventExpired, EventFailed)
	a, _ := s.Aggregate(bg, "j1")
	if a.Attempts[0].Status != AttemptExpired || a.Attempts[0].FailureCode != CodeLeaseExpired || a.Attempts[0].CompletedAt == nil {
		t.Fatalf("attempt %+v", a.Attempts[0])
	}
}

func TestRestartMidLease(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, textJob("j1", 3), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	f := fenceOf(l, "worker-1", gen(1))
	s.Close()

	s = mustOpen(t, path)
	if n, err := s.MarkAllLanesDisconnected(bg, t0.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("mark disconnected: %d %v", n, err)
	}
	a, err := s.Aggregate(bg, "j1")
	if err != nil || a.Job.Status != JobLeased || len(a.Attempts) != 1 || a.Attempts[0].Status != AttemptLeased ||
		!a.Attempts[0].DeadlineAt.Equal(l.DeadlineAt) {
		t.Fatalf("lease lost across restart: %+v %v", a, err)
	}
	// The pre-restart connection is gone: its writes are stale.
	if _, err := s.Heartbeat(bg, f, t0.Add(2*time.Second)); !errors.Is(err, ErrStale) {
		t.Fatalf("heartbeat from a dead connection: %v", err)
	}
	if _, err := s.Complete(bg, f, textOK("x"), t0.Add(2*time.Second)); !errors.Is(err, ErrStale) {
		t.Fatalf("result from a dead connection: %v", err)
	}
	r, err := s.Sweep(bg, l.DeadlineAt)
	if err != nil || len(r.Expired) != 1 || r.Expired[0].JobStatus != JobRetryWait {
		t.Fatalf("sweep after restart %+v %v", r, err)
	}
	mustConnect(t, s, "worker-1", gen(2), l.DeadlineAt)
	l2 := mustLease(t, s, "worker-1", gen(2), l.DeadlineAt.Add(time.Second))
	if l2.Ordinal != 2 {
		t.Fatalf("retry %+v", l2)
	}
	wantTypes(t, s, "j1", EventSubmitted, EventLeased, EventExpired, EventRetryScheduled, EventLeased)
}

func TestGenerationTakeover(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("j1", 3), t0)
	mustSubmit(t, s, textJob("j2", 3), t0.Add(time.Microsecond))
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	old := fenceOf(l, "worker-1", gen(1))
	mustConnect(t, s, "worker-1", gen(2), t0.Add(time.Second))
	at := t0.Add(2 * time.Second)
	if _, err := s.Heartbeat(bg, old, at); !errors.Is(err, ErrStale) {
		t.Fatalf("old heartbeat: %v", err)
	}
	if _, err := s.AddEvidence(bg, old, 1, []json.RawMessage{json.RawMessage(`{}`)}, "", at); !errors.Is(err, ErrStale) {
		t.Fatalf("old evidence: %v", err)
	}
	if _, err := s.Complete(bg, old, textOK("x"), at); !errors.Is(err, ErrStale) {
		t.Fatalf("old result: %v", err)
	}
	if _, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, nil, at); !errors.Is(err, ErrStale) {
		t.Fatalf("old lease: %v", err)
	}
	// The new generation is idle and gets the next job.
	l2 := mustLease(t, s, "worker-1", gen(2), at)
	if l2.JobID != "j2" {
		t.Fatalf("takeover lease %+v", l2)
	}
	// Compare-and-clear: the old connection ending does not disconnect the
	// replacement.
	if changed, err := s.DisconnectLane(bg, "worker-1", gen(1), at); err != nil || changed {
		t.Fatalf("stale disconnect changed the lane: %v %v", changed, err)
	}
	if _, err := s.Heartbeat(bg, fenceOf(l2, "worker-1", gen(2)), at); err != nil {
		t.Fatalf("replacement fenced by a stale disconnect: %v", err)
	}
	if changed, err := s.DisconnectLane(bg, "worker-1", gen(2), at); err != nil || !changed {
		t.Fatalf("disconnect: %v %v", changed, err)
	}
	if _, err := s.Heartbeat(bg, fenceOf(l2, "worker-1", gen(2)), at); !errors.Is(err, ErrStale) {
		t.Fatalf("heartbeat after disconnect: %v", err)
	}
	if err := s.ConnectLane(bg, "Bad Lane", "worker-1", 0, gen(3), at); !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed lane: %v", err)
	}
}

func TestEvidence(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, NewJob{ID: "j1", Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo",
		Policy: testPolicy(time.Minute, time.Second, 1, "reference")}, t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, []string{"repo"}, t0)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	f := fenceOf(l, "worker-1", gen(1))
	recs := func(v ...string) []json.RawMessage {
		out := make([]json.RawMessage, len(v))
		for i, s := range v {
			out[i] = json.RawMessage(s)
		}
		return out
	}
	if _, err := s.AddEvidence(bg, f, 2, recs(`{"a":1}`), "", t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("batch 2 first: %v", err)
	}
	if r, err := s.AddEvidence(bg, f, 1, recs(`{"phase": "plugin"}`, `{"phase":"check"}`), string(bytesOf('b', 40)), t0); err != nil || r {
		t.Fatalf("batch 1: %v %v", r, err)
	}
	if r, err := s.AddEvidence(bg, f, 1, recs(`{"phase":"plugin"}`, `{"phase":"check"}`), string(bytesOf('b', 40)), t0); err != nil || !r {
		t.Fatalf("identical replay: %v %v", r, err)
	}
	for name, batch := range map[string][]json.RawMessage{
		"changed":   recs(`{"phase":"plugin"}`, `{"phase":"other"}`),
		"shorter":   recs(`{"phase":"plugin"}`),
		"longer":    recs(`{"phase":"plugin"}`, `{"phase":"check"}`, `{}`),
		"reordered": recs(`{"phase":"check"}`, `{"phase":"plugin"}`),
	} {
		if _, err := s.AddEvidence(bg, f, 1, batch, "", t0); !errors.Is(err, ErrConflict) {
			t.Errorf("%s replay: %v", name, err)
		}
	}
	for name, batch := range map[string][]json.RawMessage{
		"empty":     nil,
		"array":     recs(`[1]`),
		"garbage":   recs(`{"a":`),
		"too many":  make([]json.RawMessage, ident.MaxEvidenceRecords+1),
		"too large": recs(`{"a":"` + string(make([]byte, 0)) + string(bytesOf('x', ident.MaxEvidenceBatchBytes)) + `"}`),
	} {
		if _, err := s.AddEvidence(bg, f, 2, batch, "", t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := s.AddEvidence(bg, f, 3, recs(`{}`), "", t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("batch 3: %v", err)
	}
	many := make([]json.RawMessage, ident.MaxEvidenceRecords-1)
	for i := range many {
		many[i] = json.RawMessage(`{}`)
	}
	if _, err := s.AddEvidence(bg, f, 2, many, "", t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("attempt record cap: %v", err)
	}
	if _, err := s.AddEvidence(bg, f, 2, recs(`{"phase":"cleanup"}`), "", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(bg, f, Outcome{Succeeded: true, CandidateSHA: string(bytesOf('b', 40))}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddEvidence(bg, f, 2, recs(`{"phase":"cleanup"}`), "", t0); !errors.Is(err, ErrStale) {
		t.Fatalf("evidence after result: %v", err)
	}
	a, err := s.Aggregate(bg, "j1")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(a.Attempts[0].Evidence)
	if string(got) != `[{"phase":"plugin"},{"phase":"check"},{"phase":"cleanup"}]` {
		t.Fatalf("evidence %s", got)
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func TestAggregateJSONShape(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("j1", 2), t0.Add(123456*time.Nanosecond))
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0.Add(time.Second))
	if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), textOK(""), t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	a, err := s.Aggregate(bg, "j1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(a)
	want := `{"job":{"id":"j1","kind":"text","status":"succeeded","result":"","attempt_count":1,` +
		`"created_at":"2026-11-29T12:00:00.000123Z","updated_at":"2026-11-29T12:00:02.000000Z"},` +
		`"attempts":[{"id":"` + l.AttemptID + `","ordinal":1,"status":"succeeded","worker_id":"worker-1",` +
		`"leased_at":"2026-11-29T12:00:01.000000Z","deadline_at":"2026-11-29T12:00:31.000000Z",` +
		`"completed_at":"2026-11-29T12:00:02.000000Z","evidence":[]}],` +
		`"events":[{"seq":1,"type":"submitted","at":"2026-11-29T12:00:00.000123Z"},` +
		`{"seq":2,"type":"leased","at":"2026-11-29T12:00:01.000000Z","attempt":1},` +
		`{"seq":3,"type":"succeeded","at":"2026-11-29T12:00:02.000000Z","attempt":1}]}`
	if string(b) != want {
		t.Fatalf("aggregate JSON\n got %s\nwant %s", b, want)
	}
	for _, id := range []string{"nope", "../x", ""} {
		if _, err := s.Aggregate(bg, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("aggregate %q: %v", id, err)
		}
		if _, err := s.Events(bg, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("events %q: %v", id, err)
		}
		if _, err := s.Job(bg, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("job %q: %v", id, err)
		}
	}
}

func TestMemoryDSNs(t *testing.T) {
	for _, dsn := range []string{":memory:", "file::memory:?cache=private", "file:lifecycle-test?mode=memory&cache=shared", "file:?mode=memory"} {
		t.Run(dsn, func(t *testing.T) {
			s := mustOpen(t, dsn)
			mustSubmit(t, s, textJob("j1", 1), t0)
			mustConnect(t, s, "worker-1", gen(1), t0)
			l := mustLease(t, s, "worker-1", gen(1), t0)
			if _, err := s.Complete(bg, fenceOf(l, "worker-1", gen(1)), textOK("x"), t0); err != nil {
				t.Fatal(err)
			}
			if mustJob(t, s, "j1").Status != JobSucceeded {
				t.Fatal("not succeeded")
			}
		})
	}
}

func TestClosedStore(t *testing.T) {
	s, _ := openFile(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(bg, textJob("j1", 1), t0); !errors.Is(err, ErrClosed) {
		t.Fatalf("submit after close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestCompleteAndLease(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustSubmit(t, s, textJob("j1", 1), t0)
	mustSubmit(t, s, textJob("j2", 1), t0.Add(time.Microsecond))
	mustConnect(t, s, "worker-1", gen(1), t0)
	l := mustLease(t, s, "worker-1", gen(1), t0)
	next := LeaseRequest{Lane: "worker-1", Generation: gen(1), Pool: "coding", Plugins: []string{"reference"}}
	f := fenceOf(l, "worker-1", gen(1))
	other := next
	other.Lane = "worker-1#1"
	if _, _, err := s.CompleteAndLease(bg, f, textOK("one"), other, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("lease for another lane: %v", err)
	}
	before := s.Stats()
	c, l2, err := s.CompleteAndLease(bg, f, textOK("one"), next, t0.Add(time.Second))
	if err != nil || c.JobStatus != JobSucceeded || l2 == nil || l2.JobID != "j2" || l2.Ordinal != 1 {
		t.Fatalf("complete and lease: %+v %+v %v", c, l2, err)
	}
	if after := s.Stats(); after.Commits-before.Commits != 1 {
		t.Fatalf("took %d commits", after.Commits-before.Commits)
	}
	// A refused result leases nothing.
	if _, l3, err := s.CompleteAndLease(bg, f, textOK("two"), next, t0.Add(time.Second)); !errors.Is(err, ErrConflict) || l3 != nil {
		t.Fatalf("conflicting replay: %v %v", l3, err)
	}
	if mustJob(t, s, "j2").Status != JobLeased {
		t.Fatal("second job not leased")
	}
	c, l3, err := s.CompleteAndLease(bg, fenceOf(l2, "worker-1", gen(1)), textOK("two"), next, t0.Add(2*time.Second))
	if err != nil || c.JobStatus != JobSucceeded || l3 != nil {
		t.Fatalf("last: %+v %+v %v", c, l3, err)
	}
	if j := mustJob(t, s, "j1"); *j.Result != "one" {
		t.Fatalf("job %+v", j)
	}
}

// A lease whose clock was read before a submit that committed first is
// stamped no earlier than that submit: a job's times never run backwards.
func TestLeaseNeverPrecedesSubmit(t *testing.T) {
	s := mustOpen(t, ":memory:")
	mustConnect(t, s, "worker-1", gen(1), t0)
	mustSubmit(t, s, textJob("late", 1), t0.Add(time.Millisecond))
	l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"reference"}, nil, t0)
	if err != nil || l == nil {
		t.Fatalf("lease %v %v", l, err)
	}
	if want := t0.Add(time.Millisecond); !l.LeasedAt.Equal(want) || !l.DeadlineAt.Equal(want.Add(30*time.Second)) {
		t.Fatalf("leased at %v, deadline %v; want %v", l.LeasedAt, l.DeadlineAt, want)
	}
	agg, err := s.Aggregate(bg, "late")
	if err != nil {
		t.Fatal(err)
	}
	if ev := agg.Events; len(ev) != 2 || ev[1].At.Time.Before(ev[0].At.Time) || agg.Attempts[0].LeasedAt.Time.Before(agg.Job.CreatedAt.Time) {
		t.Fatalf("times run backwards: %+v", agg)
	}
}
