package store

import (
	"errors"
	"testing"
	"time"
)

// A public-source coding job keeps the repository prepared at submit, and
// every lease of it names that path; text jobs and malformed paths are
// refused.
func TestPreparedPathKeptWithTheJob(t *testing.T) {
	s := mustOpen(t, ":memory:")
	const path = "/srv/forge/public/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.git"
	coding := func(id, prepared string) NewJob {
		return NewJob{ID: id, Kind: KindCoding, Task: []byte(`{"repository_id":"repo"}`), Pool: "coding",
			RepositoryID: "repo", PreparedPath: prepared, Policy: testPolicy(time.Minute, time.Second, 2, "codex")}
	}
	for name, j := range map[string]NewJob{
		"text job":      func() NewJob { j := textJob("t1", 1); j.PreparedPath = path; return j }(),
		"relative path": coding("c0", "srv/r.git"),
		"unclean path":  coding("c0", "/srv/../r.git"),
	} {
		if _, err := s.Submit(bg, j, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	mustSubmit(t, s, coding("c1", path), t0)
	mustConnect(t, s, "worker-1", gen(1), t0)
	l, err := s.Lease(bg, "worker-1", gen(1), "coding", []string{"codex"}, []string{"repo"}, t0)
	if err != nil || l == nil || l.JobID != "c1" || l.PreparedPath != path {
		t.Fatalf("lease %+v %v", l, err)
	}
	mustSubmit(t, s, coding("c2", ""), t0)
	mustConnect(t, s, "worker-2", gen(2), t0)
	l, err = s.Lease(bg, "worker-2", gen(2), "coding", []string{"codex"}, []string{"repo"}, t0)
	if err != nil || l == nil || l.JobID != "c2" || l.PreparedPath != "" {
		t.Fatalf("static lease %+v %v", l, err)
	}
}
