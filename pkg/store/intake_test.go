package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"
)

func intakeJob(id string) NewJob {
	return NewJob{ID: id, Kind: KindCoding, Task: []byte(`{}`), Pool: "coding", RepositoryID: "repo",
		BaseSHA: deliverSHA, Policy: testPolicy(time.Minute, time.Second, 1, "reference"),
		Delivery: &DeliveryTarget{Owner: "octo", Repo: "project", BaseBranch: "main"}}
}

func labelTrigger(event int64) Trigger {
	return Trigger{RepositoryID: "repo", Kind: TriggerLabel, EventID: event, Number: 7, Actor: "maintainer"}
}

func countRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.read(bg, func(q querier) error {
		return q.QueryRowContext(bg, "SELECT count(*) FROM "+table).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSubmitTriggerOnce(t *testing.T) {
	s, path := openFile(t)
	job, taken, err := s.SubmitTrigger(bg, intakeJob("j1"), labelTrigger(1001), t0)
	if err != nil || taken || job.ID != "j1" || job.Status != JobPending {
		t.Fatalf("first: %+v %v %v", job, taken, err)
	}
	// The same event again, as a re-poll would see it with a new job id.
	job, taken, err = s.SubmitTrigger(bg, intakeJob("j2"), labelTrigger(1001), t0.Add(time.Second))
	if err != nil || !taken || job.ID != "j1" {
		t.Fatalf("again: %+v %v %v", job, taken, err)
	}
	if _, err := s.Job(bg, "j2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second job exists: %v", err)
	}
	// Another kind with the same number is another trigger.
	tr := labelTrigger(1001)
	tr.Kind = TriggerComment
	if _, taken, err := s.SubmitTrigger(bg, intakeJob("j3"), tr, t0); err != nil || taken {
		t.Fatalf("comment 1001: %v %v", taken, err)
	}
	// Across a restart.
	s.Close()
	s = mustOpen(t, path)
	job, taken, err = s.SubmitTrigger(bg, intakeJob("j4"), labelTrigger(1001), t0.Add(time.Hour))
	if err != nil || !taken || job.ID != "j1" {
		t.Fatalf("after reopen: %+v %v %v", job, taken, err)
	}
	if id, ok, err := s.TriggerJob(bg, "repo", TriggerLabel, 1001); err != nil || !ok || id != "j1" {
		t.Fatalf("TriggerJob: %q %v %v", id, ok, err)
	}
	if _, ok, err := s.TriggerJob(bg, "repo", TriggerLabel, 1002); err != nil || ok {
		t.Fatalf("TriggerJob of an unknown event: %v %v", ok, err)
	}
	if n := countRows(t, s, "jobs"); n != 2 {
		t.Fatalf("%d jobs", n)
	}
	if n := countRows(t, s, "intake_triggers"); n != 2 {
		t.Fatalf("%d triggers", n)
	}
}

func TestSubmitTriggerRefusals(t *testing.T) {
	s := mustOpen(t, ":memory:")
	bad := []struct {
		name string
		j    NewJob
		tr   Trigger
	}{
		{"kind", intakeJob("a"), Trigger{RepositoryID: "repo", Kind: "labeled", EventID: 1, Number: 1, Actor: "x"}},
		{"event zero", intakeJob("a"), Trigger{RepositoryID: "repo", Kind: TriggerLabel, EventID: 0, Number: 1, Actor: "x"}},
		{"event too large", intakeJob("a"), Trigger{RepositoryID: "repo", Kind: TriggerLabel, EventID: MaxGitHubID + 1, Number: 1, Actor: "x"}},
		{"number zero", intakeJob("a"), Trigger{RepositoryID: "repo", Kind: TriggerLabel, EventID: 1, Number: 0, Actor: "x"}},
		{"actor", intakeJob("a"), Trigger{RepositoryID: "repo", Kind: TriggerLabel, EventID: 1, Number: 1, Actor: "a b"}},
		{"other repository", intakeJob("a"), Trigger{RepositoryID: "other", Kind: TriggerLabel, EventID: 1, Number: 1, Actor: "x"}},
		{"text job", textJob("a", 1), labelTrigger(1)},
		{"bad job", NewJob{ID: "a b", Kind: KindCoding, RepositoryID: "repo"}, labelTrigger(1)},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := s.SubmitTrigger(bg, tc.j, tc.tr, t0); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v", err)
			}
		})
	}
	if countRows(t, s, "jobs")+countRows(t, s, "intake_triggers") != 0 {
		t.Fatal("a refusal wrote")
	}
	// A job id already taken by another job: neither row.
	mustSubmit(t, s, intakeJob("dup"), t0)
	if _, _, err := s.SubmitTrigger(bg, intakeJob("dup"), labelTrigger(5), t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate job id: %v", err)
	}
	if _, ok, _ := s.TriggerJob(bg, "repo", TriggerLabel, 5); ok || countRows(t, s, "intake_triggers") != 0 {
		t.Fatal("trigger stored without its job")
	}
}

// TestSubmitTriggerAtomic: when the trigger row cannot be written after
// the job's, neither stays.
func TestSubmitTriggerAtomic(t *testing.T) {
	s, path := openFile(t)
	s.Close()
	raw, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TRIGGER refuse_99 BEFORE INSERT ON intake_triggers WHEN NEW.number = 99
BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	s = mustOpen(t, path)
	tr := labelTrigger(77)
	tr.Number = 99
	if _, _, err := s.SubmitTrigger(bg, intakeJob("half"), tr, t0); err == nil {
		t.Fatal("the refused trigger row was accepted")
	}
	if _, err := s.Job(bg, "half"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the job stayed without its trigger: %v", err)
	}
	if countRows(t, s, "jobs")+countRows(t, s, "intake_triggers") != 0 {
		t.Fatal("rows left behind")
	}
	// The store goes on: the same event with a storable row.
	if _, taken, err := s.SubmitTrigger(bg, intakeJob("whole"), labelTrigger(77), t0); err != nil || taken {
		t.Fatalf("after the failure: %v %v", taken, err)
	}
}

func TestSubmitTriggerConcurrent(t *testing.T) {
	s, _ := openFile(t)
	for round := int64(1); round <= 20; round++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		started, taken := 0, 0
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				id := "r" + string(rune('a'+round)) + string(rune('a'+g))
				_, tk, err := s.SubmitTrigger(context.Background(), intakeJob(id), labelTrigger(round), t0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("round %d: %v", round, err)
				case tk:
					taken++
				default:
					started++
				}
			}(g)
		}
		wg.Wait()
		if started != 1 || taken != 3 {
			t.Fatalf("round %d: %d started, %d taken", round, started, taken)
		}
	}
	if n := countRows(t, s, "jobs"); n != 20 {
		t.Fatalf("%d jobs for 20 triggers", n)
	}
}

// TestIntakeMigration: a version 2 database (no intake tables) keeps its
// jobs and takes triggers, cursors and status comments once migrated.
func TestIntakeMigration(t *testing.T) {
	s, path := openFile(t)
	mustSubmit(t, s, intakeJob("old"), t0)
	s.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range undoIntakeState(append(undoFollowups, "DROP TABLE intake_triggers", "UPDATE schema_version SET version = 2")...) {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	s = mustOpen(t, path)
	if _, err := s.Job(bg, "old"); err != nil {
		t.Fatalf("old job: %v", err)
	}
	if _, taken, err := s.SubmitTrigger(bg, intakeJob("new"), labelTrigger(1), t0); err != nil || taken {
		t.Fatalf("trigger after migration: %v %v", taken, err)
	}
	if err := s.SetIntakeCursor(bg, "repo", FeedIssues, t0); err != nil {
		t.Fatalf("cursor after migration: %v", err)
	}
	if v, err := ReadSchemaVersion(bg, path); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d %v", v, err)
	}
}

func TestJobTriggerAndTask(t *testing.T) {
	s, _ := openFile(t)
	if _, _, err := s.SubmitTrigger(bg, intakeJob("j1"), labelTrigger(1001), t0); err != nil {
		t.Fatal(err)
	}
	mustSubmit(t, s, intakeJob("plain"), t0)
	tr, ok, err := s.JobTrigger(bg, "j1")
	if err != nil || !ok || tr != labelTrigger(1001) {
		t.Fatalf("%+v %v %v", tr, ok, err)
	}
	if _, ok, err := s.JobTrigger(bg, "plain"); ok || err != nil {
		t.Fatalf("a submitted job has a trigger: %v %v", ok, err)
	}
	if task, err := s.JobTask(bg, "plain"); err != nil || string(task) != "{}" {
		t.Fatalf("task %q %v", task, err)
	}
	if _, err := s.JobTask(bg, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
}
