package store

import (
	"errors"
	"testing"
	"time"
)

// undoIntakeState takes a database back from version 5 to version 4's
// shape (with the rest of a rollback after it).
func undoIntakeState(rest ...string) []string {
	return append([]string{"DROP TABLE intake_cursors", "DROP TABLE intake_status"}, rest...)
}

func TestIntakeCursor(t *testing.T) {
	s, path := openFile(t)
	if _, ok, err := s.IntakeCursor(bg, "repo", FeedIssues); ok || err != nil {
		t.Fatalf("empty: %v %v", ok, err)
	}
	at := t0.Add(1500 * time.Microsecond)
	if err := s.SetIntakeCursor(bg, "repo", FeedIssues, at); err != nil {
		t.Fatal(err)
	}
	if err := s.SetIntakeCursor(bg, "repo", FeedComments, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetIntakeCursor(bg, "repo", FeedIssues, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, path)
	if got, ok, err := s.IntakeCursor(bg, "repo", FeedIssues); !ok || err != nil || !got.Equal(at.Add(time.Minute)) {
		t.Fatalf("issues: %v %v %v", got, ok, err)
	}
	if got, ok, err := s.IntakeCursor(bg, "repo", FeedComments); !ok || err != nil || !got.Equal(t0) {
		t.Fatalf("comments: %v %v %v", got, ok, err)
	}
	for _, bad := range []func() error{
		func() error { return s.SetIntakeCursor(bg, "repo", "events", t0) },
		func() error { return s.SetIntakeCursor(bg, "re po", FeedIssues, t0) },
		func() error { return s.SetIntakeCursor(bg, "repo", FeedIssues, time.Time{}) },
	} {
		if err := bad(); !errors.Is(err, ErrInvalid) {
			t.Fatalf("bad cursor: %v", err)
		}
	}
}

func TestIntakeStatus(t *testing.T) {
	s, path := openFile(t)
	c := StatusComment{RepositoryID: "repo", Number: 7, JobID: "j1", Posted: "accepted", UpdatedAt: t0}
	if err := s.SetIntakeStatus(bg, c); err != nil {
		t.Fatal(err)
	}
	if err := s.SetIntakeStatus(bg, StatusComment{RepositoryID: "repo", Number: 8, Posted: "refused:no_write", UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	c.CommentID, c.Posted, c.UpdatedAt = 4242, "running", t0.Add(time.Second)
	if err := s.SetIntakeStatus(bg, c); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, path)
	got, ok, err := s.IntakeStatus(bg, "repo", 7)
	if !ok || err != nil || got != c {
		t.Fatalf("got %+v %v %v, want %+v", got, ok, err, c)
	}
	if _, ok, err := s.IntakeStatus(bg, "repo", 9); ok || err != nil {
		t.Fatalf("absent: %v %v", ok, err)
	}
	open, err := s.OpenIntakeStatuses(bg)
	if err != nil || len(open) != 1 || open[0] != c {
		t.Fatalf("open %+v %v", open, err)
	}
	c.Final, c.Posted = true, "merged"
	if err := s.SetIntakeStatus(bg, c); err != nil {
		t.Fatal(err)
	}
	if open, err := s.OpenIntakeStatuses(bg); err != nil || len(open) != 0 {
		t.Fatalf("after the last word: %+v %v", open, err)
	}
	for _, bad := range []StatusComment{
		{RepositoryID: "repo", Number: 0},
		{RepositoryID: "repo", Number: 1, Posted: "a\nb"},
		{RepositoryID: "repo", Number: 1, JobID: "bad id"},
		{RepositoryID: "repo", Number: 1, CommentID: -1},
	} {
		if err := s.SetIntakeStatus(bg, bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}
